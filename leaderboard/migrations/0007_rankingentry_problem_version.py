# Rankings per problem version (issue 16): a new catalogue version (a faster baseline, say) gets
# rankings of its own; the rows of older versions stay, readable on request.

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def versions_from_submissions(apps, schema_editor):
    """Every existing row belongs to the version its submission was made against."""
    RankingEntry = apps.get_model("leaderboard", "RankingEntry")
    Submission = apps.get_model("leaderboard", "Submission")
    version = Submission.objects.filter(pk=OuterRef("submission_id")).values("problem_version")[:1]
    RankingEntry.objects.update(problem_version=Subquery(version))


class Migration(migrations.Migration):

    dependencies = [
        ('leaderboard', '0006_evaluation_provisional_report'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='rankingentry',
            name='ranking_one_problem_row_per_user',
        ),
        migrations.RemoveConstraint(
            model_name='rankingentry',
            name='ranking_one_shape_row_per_user',
        ),
        migrations.RemoveIndex(
            model_name='rankingentry',
            name='ranking_by_score_idx',
        ),
        migrations.RemoveIndex(
            model_name='rankingentry',
            name='ranking_by_time_idx',
        ),
        migrations.AddField(
            model_name='rankingentry',
            name='problem_version',
            field=models.PositiveIntegerField(default=1, help_text="The submission's catalogue version."),
            preserve_default=False,
        ),
        migrations.RunPython(versions_from_submissions, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='rankingentry',
            index=models.Index(fields=['problem', 'problem_version', 'gpu_type', 'shape', 'track', '-score', 'submitted_at'], name='ranking_by_score_idx'),
        ),
        migrations.AddIndex(
            model_name='rankingentry',
            index=models.Index(fields=['problem', 'problem_version', 'gpu_type', 'shape', 'track', 'median_us', 'submitted_at'], name='ranking_by_time_idx'),
        ),
        migrations.AddConstraint(
            model_name='rankingentry',
            constraint=models.UniqueConstraint(condition=models.Q(('shape__isnull', True)), fields=('problem', 'problem_version', 'gpu_type', 'track', 'user'), name='ranking_one_problem_row_per_user'),
        ),
        migrations.AddConstraint(
            model_name='rankingentry',
            constraint=models.UniqueConstraint(condition=models.Q(('shape__isnull', False)), fields=('problem', 'problem_version', 'gpu_type', 'shape', 'track', 'user'), name='ranking_one_shape_row_per_user'),
        ),
    ]
