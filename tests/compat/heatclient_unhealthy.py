"""python-heatclient's mark unhealthy and signal against Ember, unchanged.

Usage: heatclient_unhealthy.py ENDPOINT TOKEN
  ENDPOINT  http://HOST:PORT/orchestration/v1/PROJECT
  TOKEN     an Ember token for PROJECT (sent as X-Auth-Token)

Creates a stack with a RandomString read by a Value, an AutoScalingGroup
and a ScalingPolicy; marks the string unhealthy with
client.resources.mark_unhealthy (with and without a reason, and a reset),
checks that a bad request raises HTTPBadRequest and an unknown resource
HTTPNotFound, updates the stack with the same template and checks the
string was replaced and the Value followed; signals the policy with
client.resources.signal and waits for the group to grow; marks a member of
the group (through its nested stack) unhealthy. Prints
"heatclient mark_unhealthy: ok" and exits 0, or names the step that failed
and exits 1. Run by tests/e2e/unhealthy.rs.
"""

import sys
import time

from heatclient import client as heat_client
from heatclient import exc

SETTLE_SECONDS = 30
DEFAULT_REASON = "state changed by resource_mark_unhealthy api"

TEMPLATE = {
    "heat_template_version": "2021-04-16",
    "resources": {
        "secret": {"type": "OS::Heat::RandomString", "properties": {"length": 10}},
        "reader": {
            "type": "OS::Heat::Value",
            "properties": {"value": {"get_attr": ["secret", "value"]}},
        },
        "asg": {
            "type": "OS::Heat::AutoScalingGroup",
            "properties": {
                "min_size": 1,
                "max_size": 4,
                "resource": {"type": "OS::Heat::TestResource"},
            },
        },
        "grow": {
            "type": "OS::Heat::ScalingPolicy",
            "properties": {
                "auto_scaling_group_id": {"get_resource": "asg"},
                "adjustment_type": "exact_capacity",
                "scaling_adjustment": 3,
            },
        },
    },
}


class FlowFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise FlowFailed(message)


def wait_for(hc, stack_id, expected):
    """Polls until the stack leaves *_IN_PROGRESS; it must be `expected`."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        stack = hc.stacks.get(stack_id)
        if not stack.stack_status.endswith("_IN_PROGRESS"):
            check(
                stack.stack_status == expected,
                "stack is %s (%s), expected %s"
                % (stack.stack_status, stack.stack_status_reason, expected),
            )
            return stack
        check(time.monotonic() < deadline, "stack still %s" % stack.stack_status)
        time.sleep(0.05)


def flow(endpoint, token):
    hc = heat_client.Client("1", endpoint=endpoint, token=token)
    created = hc.stacks.create(stack_name="unhealthy", template=TEMPLATE)
    stack_id = created["stack"]["id"]
    wait_for(hc, stack_id, "CREATE_COMPLETE")
    before = hc.resources.get(stack_id, "secret").attributes["value"]

    step = "mark unhealthy without a reason"
    hc.resources.mark_unhealthy(stack_id, "secret", True, None)
    secret = hc.resources.get(stack_id, "secret")
    check(secret.resource_status == "CHECK_FAILED", "%s: %s" % (step, secret.resource_status))
    check(secret.resource_status_reason == DEFAULT_REASON, "%s: %r" % (step, secret.resource_status_reason))

    step = "reset"
    hc.resources.mark_unhealthy(stack_id, "secret", False, "")
    secret = hc.resources.get(stack_id, "secret")
    check(secret.resource_status == "CHECK_COMPLETE", "%s: %s" % (step, secret.resource_status))

    step = "mark unhealthy with a reason, by stack name"
    hc.resources.mark_unhealthy("unhealthy", "secret", True, "the app says so")
    secret = hc.resources.get(stack_id, "secret")
    check(secret.resource_status_reason == "the app says so", "%s: %r" % (step, secret.resource_status_reason))

    step = "a bad value is a 400"
    try:
        hc.resources.mark_unhealthy(stack_id, "secret", "perhaps", None)
        raise FlowFailed("%s: accepted" % step)
    except exc.HTTPBadRequest as error:
        check("mark_unhealthy" in str(error), "%s: %s" % (step, error))

    step = "an unknown resource is a 404"
    try:
        hc.resources.mark_unhealthy(stack_id, "nope", True, None)
        raise FlowFailed("%s: accepted" % step)
    except exc.HTTPNotFound:
        pass

    step = "the next update replaces it"
    hc.stacks.update(stack_id, existing=True)
    wait_for(hc, stack_id, "UPDATE_COMPLETE")
    secret = hc.resources.get(stack_id, "secret")
    check(secret.resource_status == "CREATE_COMPLETE", "%s: %s" % (step, secret.resource_status))
    check(secret.attributes["value"] != before, "%s: same value" % step)
    reader = hc.resources.get(stack_id, "reader")
    check(reader.attributes["value"] == secret.attributes["value"], "%s: reader not refreshed" % step)

    step = "signal the policy"
    hc.resources.signal(stack_id, "grow", data={"current": "alarm"})
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        group = hc.resources.get(stack_id, "asg")
        if group.resource_status != "UPDATE_IN_PROGRESS" and group.attributes["current_size"] == 3:
            break
        check(time.monotonic() < deadline, "%s: group %s %r" % (step, group.resource_status, group.attributes))
        time.sleep(0.05)

    step = "mark a group member through its nested stack"
    members = [r for r in hc.resources.list(stack_id, nested_depth=1) if getattr(r, "parent_resource", None) == "asg"]
    check(len(members) == 3, "%s: %d members" % (step, len(members)))
    member = members[0]
    nested = [s for s in hc.stacks.list(show_nested=True) if s.parent == stack_id]
    check(len(nested) == 1, "%s: %d nested stacks" % (step, len(nested)))
    nested_id = nested[0].id
    hc.resources.mark_unhealthy(nested_id, member.resource_name, True, "member broken")
    marked = hc.resources.get(nested_id, member.resource_name)
    check(marked.resource_status == "CHECK_FAILED", "%s: %s" % (step, marked.resource_status))

    hc.stacks.delete(stack_id)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        flow(sys.argv[1], sys.argv[2])
    except (FlowFailed, exc.BaseException) as error:
        print("heatclient mark_unhealthy failed: %s" % error, file=sys.stderr)
        return 1
    print("heatclient mark_unhealthy: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
