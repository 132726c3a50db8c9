"""openstacksdk with a plain clouds.yaml (password auth through Ember's
Keystone v3 front door, no endpoint overrides): orchestration and
clustering, end to end.

Usage: python openstacksdk_clouds.py   (OS_CLIENT_CONFIG_FILE names the file)
Prints "openstacksdk clouds: ok" when every step behaved.
"""

import sys
import time

import openstack

TEMPLATE = {
    "heat_template_version": "2018-08-31",
    "resources": {"word": {"type": "OS::Heat::RandomString", "properties": {"length": 8}}},
    "outputs": {"word": {"value": {"get_attr": ["word", "value"]}}},
}


def wait(what, check, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    sys.exit(f"timed out waiting for {what}")


def main():
    conn = openstack.connect(cloud="ember")
    # The catalog came from Ember's token.
    assert conn.current_project_id == "demo", conn.current_project_id
    endpoint = conn.orchestration.get_endpoint()
    assert endpoint.rstrip("/").endswith("/orchestration/v1/demo"), endpoint

    stack = conn.orchestration.create_stack(name="sdk-stack", template=TEMPLATE)
    stack = conn.orchestration.wait_for_status(stack, "CREATE_COMPLETE", failures=["CREATE_FAILED"], interval=0.2, wait=30)
    assert any(s.name == "sdk-stack" for s in conn.orchestration.stacks()), "listed"
    conn.orchestration.delete_stack(stack)
    conn.orchestration.wait_for_delete(stack, interval=0.2, wait=30)

    profile = conn.clustering.create_profile(
        name="sdk-profile",
        spec={"type": "os.heat.stack", "version": "1.0", "properties": {"template": TEMPLATE}},
    )
    cluster = conn.clustering.create_cluster(name="sdk-cluster", profile_id=profile.id, desired_capacity=2)
    wait("the cluster to be ACTIVE", lambda: conn.clustering.get_cluster(cluster.id).status == "ACTIVE")
    cluster = conn.clustering.get_cluster(cluster.id)
    assert len(cluster.node_ids) == 2, cluster.node_ids
    assert any(c.name == "sdk-cluster" for c in conn.clustering.clusters()), "listed"
    conn.clustering.delete_cluster(cluster.id)
    wait("the cluster to be gone", lambda: not any(c.id == cluster.id for c in conn.clustering.clusters()))
    conn.clustering.delete_profile(profile.id)
    print("openstacksdk clouds: ok")


if __name__ == "__main__":
    main()
