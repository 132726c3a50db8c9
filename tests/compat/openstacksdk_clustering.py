"""openstacksdk's clustering proxy (Senlin v1) against Ember, unchanged.

Usage: openstacksdk_clustering.py GATEWAY TOKEN
  GATEWAY  http://HOST:PORT, Ember's gateway; the clustering endpoint is
           GATEWAY/clustering/v1, given as an endpoint override
  TOKEN    an Ember token (sent as X-Auth-Token; no Keystone anywhere)

Connects with auth_type=admin_token and clustering_endpoint_override (the
SDK first fetches the version document at that endpoint), creates an
ember.instance profile and a cluster of 2, scales it out by 2 and in by 1,
resizes it to an exact capacity and then by a relative change with new
bounds, lists its nodes, actions and events with the SDK's filters, checks
the errors a user sees (an impossible resize, an unknown cluster), then
deletes the cluster and the profile and waits until they are gone.
Prints each step, then "cluster <id>" and "openstacksdk clustering flow: ok"
and exits 0, or names the step that failed and why and exits 1. Run by
tests/e2e/clustering/clusters_compat.rs, which then checks what is left in Ember.
"""

import sys

from keystoneauth1 import exceptions as keystoneauth_exceptions
import openstack
from openstack import exceptions

SETTLE_SECONDS = 30
POLL_SECONDS = 0.05

PROFILE_SPEC = {
    "type": "ember.instance",
    "version": "1.0",
    "properties": {"flavor": "m1.small", "image": "debian-12"},
}


class FlowFailed(Exception):
    pass


# The step running, named in the failure message whatever raised.
current_step = ["connect"]


def begin(step):
    current_step[0] = step


def check(condition, message):
    if not condition:
        raise FlowFailed(message)


def say(message):
    print("%s: %s" % (current_step[0], message), flush=True)


def connect(gateway, token):
    """A Connection that knows only a token and the clustering endpoint.

    Without a cloud name the SDK reads neither clouds.yaml nor OS_*.
    """
    return openstack.connection.Connection(
        auth_type="admin_token",
        auth={"endpoint": gateway, "token": token},
        clustering_endpoint_override=gateway + "/clustering/v1",
    )


def action_id_of(answer):
    """The action id of a cluster action's answer, {"action": id}.

    The SDK hands back the body of POST /clusters/{id}/actions whatever its
    status, so an error body has to be caught here.
    """
    check(
        isinstance(answer, dict) and isinstance(answer.get("action"), str),
        'expected {"action": id}, got %r' % (answer,),
    )
    return answer["action"]


def wait_for_action(clustering, action_id):
    action = clustering.get_action(action_id)
    try:
        action = clustering.wait_for_status(
            action,
            "SUCCEEDED",
            failures=["FAILED", "CANCELLED"],
            interval=POLL_SECONDS,
            wait=SETTLE_SECONDS,
        )
    except exceptions.ResourceFailure:
        action = clustering.get_action(action_id)
        raise FlowFailed(
            "action %s %s is %s: %s"
            % (action.action, action_id, action.status, action.status_reason)
        )
    except exceptions.ResourceTimeout:
        raise FlowFailed("action %s not done in %ss" % (action_id, SETTLE_SECONDS))
    say("action %s %s" % (action.action, action.status))
    return action


def expect_size(clustering, cluster_id, desired, min_size, max_size):
    """The cluster is ACTIVE with `desired` ACTIVE nodes, seen both ways."""
    cluster = clustering.get_cluster(cluster_id)
    check(
        cluster.status == "ACTIVE",
        "cluster is %s (%s)" % (cluster.status, cluster.status_reason),
    )
    sizes = (cluster.desired_capacity, cluster.min_size, cluster.max_size)
    check(
        sizes == (desired, min_size, max_size),
        "desired, min, max are %r, expected %r" % (sizes, (desired, min_size, max_size)),
    )
    check(len(cluster.node_ids) == desired, "node_ids %r" % (cluster.node_ids,))
    nodes = list(clustering.nodes(cluster_id=cluster_id))
    check(
        sorted(node.id for node in nodes) == sorted(cluster.node_ids),
        "nodes listed %r, the cluster has %r" % ([n.id for n in nodes], cluster.node_ids),
    )
    check(
        all(node.status == "ACTIVE" and node.cluster_id == cluster_id for node in nodes),
        "nodes %r" % ([(n.name, n.status, n.cluster_id) for n in nodes],),
    )
    check(
        all(node.physical_id for node in nodes),
        "a node without a physical_id: %r" % ([(n.name, n.physical_id) for n in nodes],),
    )
    say("%d nodes ACTIVE (min %d, max %d)" % (desired, min_size, max_size))
    return cluster


def expect_error(call, error_class, *words):
    """`call` must raise `error_class` whose text has each of `words`."""
    try:
        result = call()
    except error_class as error:
        text = str(error)
        check(all(word in text for word in words), "the error %r does not say %r" % (text, words))
        say("%s (%s)" % (type(error).__name__, text.replace("\n", " ")))
        return
    raise FlowFailed("expected %s, got %r" % (error_class.__name__, result))


def flow(gateway, token):
    conn = connect(gateway, token)
    clustering = conn.clustering

    begin("create profile")
    profile = clustering.create_profile(
        name="compat-web", spec=PROFILE_SPEC, metadata={"suite": "compat"}
    )
    check(profile.id, "no id in %r" % (profile,))
    check(profile.type == "ember.instance-1.0", "type %r" % (profile.type,))
    check(profile.spec["properties"]["image"] == "debian-12", "spec %r" % (profile.spec,))
    check(profile.metadata == {"suite": "compat"}, "metadata %r" % (profile.metadata,))
    names = [listed.name for listed in clustering.profiles()]
    check(names == ["compat-web"], "profiles listed %r" % (names,))
    check(clustering.get_profile(profile.id).name == "compat-web", "get_profile")
    say("%s %s" % (profile.name, profile.type))

    begin("create cluster")
    cluster = clustering.create_cluster(
        name="compat",
        profile_id=profile.id,
        min_size=1,
        max_size=6,
        desired_capacity=2,
        metadata={"owner": "compat"},
    )
    check(cluster.id, "no id in %r" % (cluster,))
    cluster_id = cluster.id
    try:
        cluster = clustering.wait_for_status(
            cluster, "ACTIVE", failures=["ERROR"], interval=POLL_SECONDS, wait=SETTLE_SECONDS
        )
    except (exceptions.ResourceFailure, exceptions.ResourceTimeout) as error:
        raise FlowFailed(str(error))
    check(cluster.name == "compat", "name %r" % (cluster.name,))
    check(cluster.profile_id == profile.id, "profile_id %r" % (cluster.profile_id,))
    check(cluster.profile_name == "compat-web", "profile_name %r" % (cluster.profile_name,))
    check(cluster.metadata == {"owner": "compat"}, "metadata %r" % (cluster.metadata,))
    expect_size(clustering, cluster_id, 2, 1, 6)
    check(clustering.find_cluster("compat").id == cluster_id, "find_cluster by name")
    listed = [listed.id for listed in clustering.clusters(status="ACTIVE")]
    check(listed == [cluster_id], "clusters(status=ACTIVE) %r" % (listed,))

    begin("scale out by 2")
    wait_for_action(clustering, action_id_of(clustering.scale_out_cluster(cluster_id, 2)))
    expect_size(clustering, cluster_id, 4, 1, 6)

    begin("scale in by 1")
    wait_for_action(clustering, action_id_of(clustering.scale_in_cluster(cluster_id, 1)))
    expect_size(clustering, cluster_id, 3, 1, 6)

    begin("resize to exactly 5")
    answer = clustering.resize_cluster(
        cluster_id, adjustment_type="EXACT_CAPACITY", number=5, strict=True
    )
    wait_for_action(clustering, action_id_of(answer))
    expect_size(clustering, cluster_id, 5, 1, 6)

    begin("resize by -3 with new bounds")
    answer = clustering.resize_cluster(
        cluster_id,
        adjustment_type="CHANGE_IN_CAPACITY",
        number=-3,
        min_size=2,
        max_size=4,
        strict=True,
    )
    wait_for_action(clustering, action_id_of(answer))
    expect_size(clustering, cluster_id, 2, 2, 4)

    begin("resize beyond max_size")
    answer = clustering.resize_cluster(
        cluster_id, adjustment_type="EXACT_CAPACITY", number=9, strict=True
    )
    # A bad request (400), as Senlin answers it; the SDK hands back the
    # error body, which must say why.
    check(
        isinstance(answer, dict) and answer.get("code") == 400 and "action" not in answer,
        "expected a 400 error body, got %r" % (answer,),
    )
    message = answer.get("error", {}).get("message", "")
    # Senlin's own words, which its clients compare.
    check(
        message == "The target capacity (9) is greater than the cluster's max_size (4).",
        "unclear message %r" % (message,),
    )
    say("refused: %s" % message)
    expect_size(clustering, cluster_id, 2, 2, 4)

    begin("list actions")
    actions = list(clustering.actions(cluster_id=cluster_id))
    kinds = sorted(action.action for action in actions if action.target_id == cluster_id)
    expected = [
        "CLUSTER_CREATE",
        "CLUSTER_RESIZE",
        "CLUSTER_RESIZE",
        "CLUSTER_SCALE_IN",
        "CLUSTER_SCALE_OUT",
    ]
    check(kinds == expected, "the cluster's own actions are %r" % (kinds,))
    check(
        all(action.status == "SUCCEEDED" for action in actions),
        "%r" % ([(a.action, a.status) for a in actions],),
    )
    resizes = list(clustering.actions(target_id=cluster_id, action="CLUSTER_RESIZE"))
    check(
        [(a.action, a.target_id) for a in resizes] == [("CLUSTER_RESIZE", cluster_id)] * 2,
        "actions(target_id=, action=) %r" % ([(a.action, a.target_id) for a in resizes],),
    )
    check(clustering.get_action(resizes[0].id).id == resizes[0].id, "get_action")
    say("%d actions, %d resizes" % (len(actions), len(resizes)))

    begin("list events")
    events = list(clustering.events(cluster_id=cluster_id))
    check(len(events) >= 5, "only %d events" % len(events))
    check(
        all(event.cluster_id == cluster_id for event in events),
        "events of other clusters %r" % ([e.cluster_id for e in events],),
    )
    # The SDK sends obj_id, obj_type and obj_name as Senlin's oid, otype and
    # oname.
    own_events = list(clustering.events(obj_id=cluster_id))
    check(
        own_events and all(event.obj_id == cluster_id for event in own_events),
        "events(obj_id=) %r" % ([e.obj_id for e in own_events],),
    )
    named = list(clustering.events(obj_name="compat", obj_type="CLUSTER"))
    check(
        named and all(e.obj_name == "compat" and e.obj_type == "CLUSTER" for e in named),
        "events(obj_name=, obj_type=) %r" % ([(e.obj_name, e.obj_type) for e in named],),
    )
    resize_events = list(clustering.events(cluster_id=cluster_id, action="CLUSTER_RESIZE"))
    check(
        resize_events and all(e.action == "CLUSTER_RESIZE" for e in resize_events),
        "events(action=) %r" % ([e.action for e in resize_events],),
    )
    check(
        any(e.status == "SUCCEEDED" for e in resize_events),
        "no SUCCEEDED resize event: %r" % ([(e.obj_type, e.status) for e in resize_events],),
    )
    say("%d events, %d of the cluster itself" % (len(events), len(own_events)))

    begin("unknown cluster")
    unknown = "no-such-cluster"
    expect_error(lambda: clustering.get_cluster(unknown), exceptions.NotFoundException, unknown)
    expect_error(
        lambda: clustering.scale_out_cluster(unknown, 1), exceptions.NotFoundException, unknown
    )
    check(clustering.find_cluster(unknown) is None, "find_cluster found %r" % unknown)

    begin("delete cluster")
    deleted = clustering.delete_cluster(cluster_id)
    check(deleted is not None and deleted.id, "no action from %r" % (deleted,))
    wait_for_action(clustering, deleted.id)
    try:
        clustering.wait_for_delete(cluster, interval=POLL_SECONDS, wait=SETTLE_SECONDS)
    except exceptions.ResourceTimeout as error:
        raise FlowFailed(str(error))
    expect_error(
        lambda: clustering.get_cluster(cluster_id), exceptions.NotFoundException, cluster_id
    )
    check(list(clustering.clusters()) == [], "still listed")
    # (nodes(cluster_id=) of a deleted cluster is an error, as in Senlin.)
    left = [node.name for node in clustering.nodes() if node.cluster_id == cluster_id]
    check(left == [], "nodes left %r" % (left,))

    begin("delete profile")
    clustering.delete_profile(profile.id, ignore_missing=False)
    check(list(clustering.profiles()) == [], "still listed")
    say("gone")

    print("cluster %s" % cluster_id)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        flow(sys.argv[1], sys.argv[2])
    except (
        FlowFailed,
        exceptions.SDKException,
        keystoneauth_exceptions.ClientException,
    ) as error:
        print(
            "openstacksdk clustering flow failed at %r: %s: %s"
            % (current_step[0], type(error).__name__, error),
            file=sys.stderr,
        )
        return 1
    print("openstacksdk clustering flow: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
