"""python-heatclient against Ember's Orchestration API, unchanged.

Usage: heatclient_flow.py ENDPOINT TOKEN
  ENDPOINT  http://HOST:PORT/orchestration/v1/PROJECT
  TOKEN     an Ember token for PROJECT (sent as X-Auth-Token)

Creates a stack with parameters, waits for CREATE_COMPLETE, lists its
resources, reads an output, updates it with PATCH (existing=True), runs
suspend/resume/check through client.actions, reads events and deletes it.
Prints "heatclient flow: ok" and exits 0, or names the step that failed and
exits 1. Run by tests/e2e/orchestration/heatclient.rs.
"""

import sys
import time

from heatclient import client as heat_client
from heatclient import exc

SETTLE_SECONDS = 30

TEMPLATE = {
    "heat_template_version": "2018-08-31",
    "description": "heatclient compatibility stack",
    "parameters": {
        "greeting": {"type": "string"},
        "length": {"type": "number", "default": 8},
    },
    "resources": {
        "random": {
            "type": "OS::Heat::RandomString",
            "properties": {"length": {"get_param": "length"}},
        },
        "slow": {
            "type": "OS::Heat::TestResource",
            "properties": {
                "value": {"get_param": "greeting"},
                "action_wait_secs": {"create": 0.2},
            },
        },
        "echo": {
            "type": "OS::Heat::Value",
            "properties": {"value": {"get_attr": ["slow", "output"]}},
        },
        "nothing": {"type": "OS::Heat::None"},
    },
    "outputs": {
        "greeting": {
            "description": "what echo says",
            "value": {"get_attr": ["echo", "value"]},
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
        check(
            time.monotonic() < deadline,
            "stack still %s after %ss" % (stack.stack_status, SETTLE_SECONDS),
        )
        time.sleep(0.05)


def wait_until_deleted(hc, stack_id):
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        try:
            stack = hc.stacks.get(stack_id)
        except exc.HTTPNotFound:
            return
        if stack.stack_status == "DELETE_COMPLETE":
            return
        check(stack.stack_status != "DELETE_FAILED", stack.stack_status_reason)
        check(time.monotonic() < deadline, "stack not deleted in time")
        time.sleep(0.05)


def output_value(hc, stack_id, key):
    return hc.stacks.output_show(stack_id, key)["output"]["output_value"]


def flow(endpoint, token):
    hc = heat_client.Client("1", endpoint=endpoint, token=token)

    step = "create"
    created = hc.stacks.create(
        stack_name="compat",
        template=TEMPLATE,
        parameters={"greeting": "hello", "length": 5},
        tags="compat,heatclient",
    )
    stack_id = created["stack"]["id"]
    stack = wait_for(hc, stack_id, "CREATE_COMPLETE")
    check(stack.stack_name == "compat", "%s: name %r" % (step, stack.stack_name))
    check(stack.identifier == "compat/" + stack_id, "identifier %r" % stack.identifier)
    check(stack.parameters["greeting"] == "hello", "parameters %r" % stack.parameters)

    step = "list stacks"
    names = [listed.stack_name for listed in hc.stacks.list()]
    check(names == ["compat"], "%s: %r" % (step, names))

    step = "list resources"
    resources = hc.resources.list(stack_id)
    names = sorted(resource.resource_name for resource in resources)
    check(names == ["echo", "nothing", "random", "slow"], "%s: %r" % (step, names))
    check(
        all(r.resource_status == "CREATE_COMPLETE" for r in resources),
        "%s: %r" % (step, [r.resource_status for r in resources]),
    )
    random = hc.resources.get(stack_id, "random")
    check(len(random.attributes["value"]) == 5, "random attributes %r" % random.attributes)

    step = "outputs"
    check(output_value(hc, stack_id, "greeting") == "hello", step)
    keys = [output["output_key"] for output in hc.stacks.output_list(stack_id)["outputs"]]
    check(keys == ["greeting"], "%s: %r" % (step, keys))

    step = "update with PATCH"
    hc.stacks.update(stack_id, existing=True, parameters={"greeting": "bye"})
    wait_for(hc, stack_id, "UPDATE_COMPLETE")
    check(output_value(hc, stack_id, "greeting") == "bye", step)

    step = "actions"
    hc.actions.suspend(stack_id)
    wait_for(hc, stack_id, "SUSPEND_COMPLETE")
    hc.actions.resume(stack_id)
    wait_for(hc, stack_id, "RESUME_COMPLETE")
    hc.actions.check(stack_id)
    wait_for(hc, stack_id, "CHECK_COMPLETE")

    step = "events"
    events = hc.events.list(stack_id)
    check(len(events) >= 10, "%s: only %d events" % (step, len(events)))
    check(events[0].resource_status == "CREATE_IN_PROGRESS", step)
    slow_events = hc.events.list(stack_id, resource_name="slow")
    check(all(e.resource_name == "slow" for e in slow_events), step)
    event = hc.events.get(stack_id, "slow", slow_events[0].id)
    check(event.id == slow_events[0].id, "%s: event %r" % (step, event))

    step = "template"
    template = hc.stacks.template(stack_id)
    check(template["heat_template_version"] == "2018-08-31", step)

    step = "delete"
    hc.stacks.delete(stack_id)
    wait_until_deleted(hc, stack_id)
    check(list(hc.stacks.list()) == [], "%s: still listed" % step)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        flow(sys.argv[1], sys.argv[2])
    except (FlowFailed, exc.BaseException) as error:
        print("heatclient flow failed: %s" % error, file=sys.stderr)
        return 1
    print("heatclient flow: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
