#!/bin/sh
# ensure-redis.sh [PORT]: make sure a Redis server answers on 127.0.0.1
# (port 6379 by default), for semd.conf's "redis 127.0.0.1:6379". Starts
# one if none answers: the system service where there is one, else a
# redis-server of its own with an append-only file fsynced on every
# write, which is what semd's sync mode needs to survive a crash.
set -eu
port=${1:-6379}

answers() {
	[ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]
}

answers && exit 0
if [ "$port" = 6379 ] && command -v systemctl >/dev/null 2>&1 &&
    systemctl start redis-server 2>/dev/null; then
	sleep 0.5
	answers && exit 0
fi
dir=/var/lib/semd-redis
[ "$(id -u)" -eq 0 ] || dir=${TMPDIR:-/tmp}/semd-redis
mkdir -p "$dir"
echo "ensure-redis: starting redis-server on 127.0.0.1:$port (data in $dir)" >&2
redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" \
    --appendonly yes --appendfsync always --daemonize yes \
    --logfile "$dir/redis.log" --pidfile "$dir/redis.pid"
i=0
while ! answers; do
	i=$((i + 1))
	if [ "$i" -gt 50 ]; then
		echo "ensure-redis: redis-server did not answer; see $dir/redis.log" >&2
		exit 1
	fi
	sleep 0.1
done
