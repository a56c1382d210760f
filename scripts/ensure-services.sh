#!/usr/bin/env bash
# Start the local Postgres and Redis the tests use, when they are not already running.
set -euo pipefail
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  echo "starting postgres"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
# The dashboard's browser tests drive Debian's chromium through Playwright.
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing chromium (dashboard browser tests)"
  nice -n 10 apt-get install -y -q chromium >/dev/null || {
    nice -n 10 apt-get update -q >/dev/null && nice -n 10 apt-get install -y -q chromium >/dev/null
  } || echo "could not install chromium: the dashboard browser tests will be skipped" >&2
fi
pg_isready -h 127.0.0.1 -p 5432
redis-cli -h 127.0.0.1 -p 6379 ping
