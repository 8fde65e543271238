#!/bin/sh
# Starts redis-server with redis.conf, announcing this node under
# REDIS_ANNOUNCE_HOSTNAME (default: the container's hostname, which
# compose.cluster.yml sets to the service name). Arguments are passed on to
# redis-server (e.g. --cluster-node-timeout 15000).
set -eu
host=${REDIS_ANNOUNCE_HOSTNAME:-$(hostname)}
exec redis-server /etc/redis/redis.conf --cluster-announce-hostname "$host" "$@"
