"""Prepare the test cloud for Ember's tests (idempotent).

Run with the OpenStack venv's interpreter after start-openstack.sh, with
OS_CLIENT_CONFIG_FILE pointing at its clouds.yaml:

    python tests/openstack/setup_cloud.py OUT.json IMAGE_DIR IMAGE_PORT

Makes, if missing:
  * Ember's service user `ember` (password `secret`) in project `service`
    with roles admin and service, as Heat's service user has: it is the
    trustee of the trusts Ember acts through, and lists servers of every
    project to follow them;
  * project `alt` with user `alt` (member): another tenant, for the tests
    that one project never reaches another's objects;
  * a raw image `ember-test-raw` (64 KiB, public: the fake virt driver
    boots only raw images) and flavors `ember.tiny`, `ember.small`,
    `ember.nohost` (no host fits its disk) and `ember.huge` (64 TiB of
    memory: beyond the projects' quota);
  * an external flat network `public` (physnet `public`) with subnet
    172.24.4.0/24, for routers' gateways and floating IPs;
  * quotas in `demo` and `alt` large enough for the benchmarks;
  * IMAGE_DIR/ember-test.raw, served at http://127.0.0.1:IMAGE_PORT/ for
    Glance's web-download imports.
and writes OUT.json: the facts Ember's tests read (URLs, users, passwords,
ids, names).
"""

import json
import os
import sys

import openstack

out, image_dir, image_port = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = openstack.connect(cloud="os-admin")
idn = admin.identity
domain = idn.find_domain("default")


def project(name):
    return idn.find_project(name, domain_id=domain.id) or idn.create_project(
        name=name, domain_id=domain.id)


def user(name, password, project_):
    found = idn.find_user(name, domain_id=domain.id)
    if found:
        idn.update_user(found, password=password)
        return found
    return idn.create_user(name=name, password=password, domain_id=domain.id,
                           default_project_id=project_.id)


roles = {name: idn.find_role(name) for name in ("admin", "member", "reader", "service")}
service, demo, alt = project("service"), project("demo"), project("alt")
ember = user("ember", "secret", service)
for role in ("admin", "service"):
    idn.assign_project_role_to_user(service, ember, roles[role])
alt_user = user("alt", "alt", alt)
idn.assign_project_role_to_user(alt, alt_user, roles["member"])
demo_user = idn.find_user("demo", domain_id=domain.id)
admin_user = idn.find_user("admin", domain_id=domain.id)
admin_project = idn.find_project("admin", domain_id=domain.id)

os.makedirs(image_dir, exist_ok=True)
raw_path = os.path.join(image_dir, "ember-test.raw")
if not os.path.exists(raw_path):
    with open(raw_path, "wb") as raw:
        raw.write(b"\0" * 65536)
image = admin.image.find_image("ember-test-raw")
if image is None:
    image = admin.image.create_image(
        name="ember-test-raw", filename=raw_path, disk_format="raw",
        container_format="bare", visibility="public", wait=True)

flavors = {}
# ember.nohost fits no host (its disk is larger than the fake hypervisor's
# 600,000 GB: Nova's scheduler answers "No valid host"); ember.huge is
# beyond the projects' quota (Nova refuses it at once).
for name, ram, vcpus, disk in (("ember.tiny", 128, 1, 1), ("ember.small", 256, 1, 1),
                               ("ember.nohost", 128, 1, 700000),
                               ("ember.huge", 64 * 1024 * 1024, 1, 1)):
    flavor = admin.compute.find_flavor(name)
    if flavor is None:
        flavor = admin.compute.create_flavor(name=name, ram=ram, vcpus=vcpus, disk=disk)
    flavors[name] = flavor.id

public = admin.network.find_network("public")
if public is None:
    public = admin.network.create_network(
        name="public", is_router_external=True, provider_network_type="flat",
        provider_physical_network="public", is_shared=False)
public_subnet = admin.network.find_subnet("public-subnet")
if public_subnet is None:
    public_subnet = admin.network.create_subnet(
        name="public-subnet", network_id=public.id, ip_version=4,
        cidr="172.24.4.0/24", gateway_ip="172.24.4.1", is_dhcp_enabled=False,
        allocation_pools=[{"start": "172.24.4.10", "end": "172.24.4.250"}])

for tenant in (demo, alt):
    admin.set_compute_quotas(tenant.id, instances=100, cores=200, ram=512000)
    admin.set_network_quotas(tenant.id, port=500, network=100, subnet=100,
                             router=50, floatingip=100, security_group=100,
                             security_group_rule=1000)
    admin.set_volume_quotas(tenant.id, volumes=100, gigabytes=1000)

auth_url = admin.config.config["auth"]["auth_url"]
facts = {
    "auth_url": auth_url,
    "region": "RegionOne",
    "domain": "Default",
    "service": {"user": "ember", "password": "secret", "project": "service",
                "user_id": ember.id, "project_id": service.id},
    "admin": {"user": "admin", "password": "admin", "project": "admin",
              "user_id": admin_user.id, "project_id": admin_project.id},
    "demo": {"user": "demo", "password": "demo", "project": "demo",
             "user_id": demo_user.id, "project_id": demo.id},
    "alt": {"user": "alt", "password": "alt", "project": "alt",
            "user_id": alt_user.id, "project_id": alt.id},
    "image": {"name": "ember-test-raw", "id": image.id},
    "flavors": flavors,
    "public_network": {"name": "public", "id": public.id,
                       "subnet_id": public_subnet.id},
    "image_url": f"http://127.0.0.1:{image_port}/ember-test.raw",
    "clouds_yaml": os.environ.get("OS_CLIENT_CONFIG_FILE", ""),
}
with open(out + ".tmp", "w") as handle:
    json.dump(facts, handle, indent=2)
os.replace(out + ".tmp", out)
print(out)
