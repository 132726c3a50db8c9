#!/bin/sh
# A worker: takes a job every JOB_SECONDS until it is told to drain (the
# file /tmp/drain appears), then finishes the job in hand, says so
# (/tmp/drained) and idles until its container is removed.
job=0
while [ ! -e /tmp/drain ]; do
    job=$((job + 1))
    echo "job $job: started"
    sleep "${JOB_SECONDS:-3}"
    echo "job $job: done"
done
echo "drained: $job jobs done, none in hand"
touch /tmp/drained
exec sleep 86400
