set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/pydantic*.whl .whl/annotated_types*.whl .whl/typing_inspection*.whl .whl/typing_extensions*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
T0=$(date +%s)
echo "== quality $(date -u)"
timeout 200 python3 benchmarks/measurement_quality.py --out $OUT/measurement_quality.json > $OUT/quality.log 2>&1; echo "quality rc=$? at $(( $(date +%s)-T0 ))s"
echo "== e2e $(date -u)"
mkdir -p /tmp/e2e
OUT=/tmp/e2e PYTHONPATH=$PWD timeout 130 bash benchmarks/gpu_e2e.sh > /tmp/e2e/stdout.log 2>&1; echo "e2e rc=$? at $(( $(date +%s)-T0 ))s"
tar czf $OUT/e2e.tar.gz -C /tmp e2e
LEFT=$(( 300 - ($(date +%s)-T0) ))
echo "== baselines, ${LEFT}s left"
if [ $LEFT -gt 40 ]; then timeout $LEFT python3 benchmarks/gpu_round.py --out $OUT/round2 --sections baselines --baseline-shapes quick --calibration benchmarks/results/h200_round1/calibration.json --budget $((LEFT-10)) > $OUT/round2.log 2>&1; echo "baselines rc=$?"; fi
python3 - <<'PY'
import json,os
out=os.environ['OUT']
try:
    q=json.load(open(out+'/measurement_quality.json'))
    print('spread', q['spread'])
    for r in q['accuracy']: print('acc', {k:r[k] for k in ('kernel','ours_median_us','event_median_us','ncu_gpu_time_us','ours_vs_ncu_rel','triton_do_bench_us','ours_ci95_half_width_rel','wall_seconds_shape')})
    for r in q['whole_ranked']: print('whole', r)
except Exception as e: print('quality parse', e)
try:
    s=json.load(open('/tmp/e2e/gpu_e2e_summary.json')); print('e2e', {k:v for k,v in s.items() if k!='provenance'})
except Exception as e: print('e2e parse', e)
try:
    d=json.load(open(out+'/round2/summary.json'))
    for r in d['sections']['baselines']:
        print('base', r['problem'], r.get('status'), r.get('problem_score'), r.get('rank_eligible'), r.get('flags'), [(s['shape'], s['score'], s['median_us'], s['baseline_us'], s['source']) for s in r.get('shapes',[])], (r.get('error') or '')[:200])
except Exception as e: print('round2 parse', e)
PY
