#!/usr/bin/env bash
# Website benchmark: 100,000 seeded submissions on PostgreSQL, served as the production example
# serves them (docs/configuration.md: uvicorn with the ASGI app, DEBUG off, static files collected,
# the page cache in Redis, the site worker, which rebuilds out-of-date pages), 50 locust users
# loading the ranking pages and the home page for 60 s while new results arrive.
# Traffic stays on 127.0.0.1. Results under $OUT (locust CSVs and summary.txt, with the machine's
# load average before and after: other work on the machine shows in the figures); the recorded
# figures are in benchmarks/results/site.md.
#
#   OUT=/tmp/web benchmarks/web_bench.sh            seed a fresh database (about 15 min on 2 cores), then load it
#   REUSE=1 OUT=/tmp/web benchmarks/web_bench.sh    load the database seeded by an earlier run
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
DB=${WEB_BENCH_DB:-solboard_webbench}
export DATABASE_URL=${WEB_BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/$DB}
SUBMISSIONS=${SUBMISSIONS:-100000}
USERS=${USERS:-50}
DURATION=${DURATION:-60s}
WORKERS=${WORKERS:-4}  # as in the production example
PORT=${PORT:-8077}
OUT=${OUT:?set OUT to the folder that receives the results}
mkdir -p "$OUT"

# The production example (docs/configuration.md), on loopback without TLS.
export DEBUG=false SECRET_KEY=web-bench-only-$RANDOM$RANDOM ALLOWED_HOSTS=127.0.0.1
export SECURE_SSL_REDIRECT=false SECURE_HSTS_SECONDS=0
export STATIC_ROOT=${STATIC_ROOT:-$(mktemp -d /tmp/solboard-web-static.XXXXXX)}
export CELERY_BROKER_URL=${CELERY_BROKER_URL:-redis://127.0.0.1:6379/4}  # the benchmark's own queues
export CELERY_RESULT_BACKEND=${CELERY_RESULT_BACKEND:-redis://127.0.0.1:6379/4}
export SOLBOARD_CACHE_URL=${SOLBOARD_CACHE_URL:-redis://127.0.0.1:6379/5}  # one page cache for all workers

if [ "${REUSE:-0}" != 1 ]; then
    psql -h 127.0.0.1 -U postgres -qc "drop database if exists $DB" -c "create database $DB"
    "$PY" manage.py migrate -v0
    "$PY" manage.py sync_gpu_types >/dev/null && "$PY" manage.py sync_problems >/dev/null
    "$PY" benchmarks/web_seed.py --submissions "$SUBMISSIONS" --users 1000 | tail -1 > "$OUT/seed.txt"
fi
"$PY" manage.py collectstatic --noinput -v0
"$PY" manage.py shell -c "from django.core.cache import cache; cache.clear()"  # no page from an earlier run
"$PY" -m celery -A leaderboard.celery purge -f -Q site >/dev/null  # no task from an earlier run

.venv/bin/uvicorn leaderboard.asgi:application --workers "$WORKERS" --host 127.0.0.1 --port "$PORT" \
    --log-level warning --no-access-log 2> "$OUT/server.log" &
server=$!
# The site worker as in the production example: it rebuilds the pages that went out of date.
"$PY" -m celery -A leaderboard.celery worker -Q site --concurrency "${SITE_WORKERS:-4}" --loglevel warning \
    2> "$OUT/worker.log" &
worker=$!
trap 'kill $server $worker 2>/dev/null; wait $server $worker 2>/dev/null || true' EXIT
for _ in $(seq 60); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 1; done
for gpu in h100 h200 b200; do  # warm each worker's connection and template caches, as a running site has them
    for problem in vector_add gemm_bf16 softmax rmsnorm swiglu; do curl -sf -o /dev/null "http://127.0.0.1:$PORT/problems/$problem/?gpu=$gpu"; done
done

# A new result every RESULT_EVERY seconds (one problem's pages and the home page out of date, rebuilt
# by the site worker); it notes how long each page stays out of date (staleness.txt).
"$PY" benchmarks/web_new_results.py --every "${RESULT_EVERY:-2}" --staleness "$OUT/staleness.txt" &
results=$!
trap 'kill $server $worker $results 2>/dev/null; wait $server $worker $results 2>/dev/null || true' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
.venv/bin/locust -f benchmarks/web_load.py --headless -u "$USERS" -r 10 -t "$DURATION" --only-summary \
    --host "http://127.0.0.1:$PORT" --csv "$OUT/locust" 2>&1 | tail -25 | tee "$OUT/summary.txt"
kill $results && wait $results || true
{
    cat "$OUT/staleness.txt"
    echo "commit $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores, uvicorn --workers $WORKERS,"
    echo "site worker (page rebuilds) --concurrency ${SITE_WORKERS:-4}, locust client: ${WEB_BENCH_CLIENT:-fasthttp},"
    echo "load average (1, 5, 15 min) before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "$USERS locust users (0.5-1.5 s think time) for $DURATION, a new result every ${RESULT_EVERY:-2} s,"
    echo "SOLBOARD_WEB_CACHE_SECONDS=${SOLBOARD_WEB_CACHE_SECONDS:-10}, seed: $(cat "$OUT/seed.txt" 2>/dev/null)"
} >> "$OUT/summary.txt"
