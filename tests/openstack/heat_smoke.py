#!/usr/bin/env python3
"""Smoke test of real OpenStack Heat (tests/openstack/heat.sh) on the test cloud.

As demo: one HOT stack with OS::Neutron::Net + Subnet + Router (gateway
`public`) + RouterInterface + Port + OS::Nova::Server (on that port) +
OS::Neutron::FloatingIP (on `public`, port_id = the port); waits for
CREATE_COMPLETE, checks the server is ACTIVE in Nova and the floating IP is
on its port in Neutron, deletes the stack, waits for DELETE_COMPLETE and
checks nothing of it is left.  Prints timings; exits 1 with Heat's status
reasons on failure.

    export OS_CLIENT_CONFIG_FILE=target/openstack/clouds.yaml
    target/openstack/venv/bin/python tests/openstack/heat_smoke.py [--cloud os-demo] [--keep]
"""
import argparse
import json
import os
import sys
import time

import openstack

TEMPLATE = {
    'heat_template_version': '2021-04-16',
    'description': 'Ember benchmark smoke: net, subnet, router, port, server, floating IP',
    'parameters': {
        'image': {'type': 'string', 'default': 'ember-test-raw'},
        'flavor': {'type': 'string', 'default': 'ember.tiny'},
        'public_net': {'type': 'string', 'default': 'public'},
    },
    'resources': {
        'net': {'type': 'OS::Neutron::Net', 'properties': {'name': 'heat-smoke-net'}},
        'subnet': {'type': 'OS::Neutron::Subnet', 'properties': {
            'network': {'get_resource': 'net'}, 'cidr': '10.77.0.0/24', 'ip_version': 4}},
        'router': {'type': 'OS::Neutron::Router', 'properties': {
            'external_gateway_info': {'network': {'get_param': 'public_net'}}}},
        'router_if': {'type': 'OS::Neutron::RouterInterface', 'properties': {
            'router': {'get_resource': 'router'}, 'subnet': {'get_resource': 'subnet'}}},
        'port': {'type': 'OS::Neutron::Port', 'properties': {
            'network': {'get_resource': 'net'},
            'fixed_ips': [{'subnet': {'get_resource': 'subnet'}}]}},
        'server': {'type': 'OS::Nova::Server', 'properties': {
            'image': {'get_param': 'image'}, 'flavor': {'get_param': 'flavor'},
            'networks': [{'port': {'get_resource': 'port'}}]}},
        'fip': {'type': 'OS::Neutron::FloatingIP', 'depends_on': ['router_if'],
                'properties': {'floating_network': {'get_param': 'public_net'},
                               'port_id': {'get_resource': 'port'}}},
    },
    'outputs': {
        'server_id': {'value': {'get_resource': 'server'}},
        'port_id': {'value': {'get_resource': 'port'}},
        'fip_id': {'value': {'get_resource': 'fip'}},
        'fixed_ip': {'value': {'get_attr': ['port', 'fixed_ips', 0, 'ip_address']}},
        'floating_ip': {'value': {'get_attr': ['fip', 'floating_ip_address']}},
    },
}


def fail(msg):
    print('FAILED: ' + msg, file=sys.stderr)
    sys.exit(1)


def reasons(conn, stack):
    """Heat's status reason of the stack and of every resource not COMPLETE."""
    out = ['stack %s: %s' % (stack.status, stack.status_reason)]
    try:
        for r in conn.orchestration.resources(stack):
            if not r.status.endswith('COMPLETE'):
                out.append('  %s (%s): %s: %s' % (r.name, r.resource_type, r.status,
                                                  r.status_reason))
    except Exception as e:  # the stack may be gone already
        out.append('  (resources not listed: %s)' % e)
    return '\n'.join(out)


def timeline(conn, stack, action):
    """Per resource: seconds (Heat's event times, 1 s resolution) from the first
    event of the stack's ACTION to the resource's ACTION_IN_PROGRESS and _COMPLETE."""
    from datetime import datetime
    ts = lambda e: datetime.fromisoformat(e.event_time.replace('Z', '+00:00'))
    try:
        evs = [e for e in conn.orchestration.stack_events(stack)
               if e.resource_status and e.resource_status.startswith(action + '_')]
    except Exception as e:
        return '  (no events: %s)' % e
    if not evs:
        return '  (no events)'
    t0 = min(ts(e) for e in evs)
    rows = {}
    for e in sorted(evs, key=ts):
        if e.resource_name == stack.name:
            continue
        r = rows.setdefault(e.resource_name, {})
        r.setdefault(e.resource_status.split('_', 1)[1], (ts(e) - t0).total_seconds())
    return '\n'.join('  %-10s %s %4.0fs -> %4.0fs' % (n, action, r.get('IN_PROGRESS', -1),
                                                      r.get('COMPLETE', -1))
                     for n, r in sorted(rows.items(), key=lambda x: x[1].get('COMPLETE', 1e9)))


def wait(conn, stack_id, want, timeout):
    """Poll until the stack reaches `want`; returns (stack or None if gone, seconds)."""
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        st = conn.orchestration.find_stack(stack_id, ignore_missing=True)
        if st is None:
            if want == 'DELETE_COMPLETE':
                return None, time.monotonic() - t0
            fail('stack %s disappeared' % stack_id)
        if st.status != last:
            print('  [%5.1fs] %s' % (time.monotonic() - t0, st.status), flush=True)
            last = st.status
        if st.status == want:
            return st, time.monotonic() - t0
        if st.status.endswith('FAILED'):
            raise RuntimeError(reasons(conn, st))
        time.sleep(0.5)
    raise RuntimeError('timed out after %ds waiting for %s\n%s' % (timeout, want, reasons(conn, st)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--cloud', default='os-demo')
    ap.add_argument('--name', default='heat-smoke-%d' % int(time.time()))
    ap.add_argument('--timeout', type=int, default=300)
    ap.add_argument('--keep', action='store_true', help='do not delete the stack')
    args = ap.parse_args()
    if 'OS_CLIENT_CONFIG_FILE' not in os.environ:
        here = os.path.dirname(os.path.abspath(__file__))
        os.environ['OS_CLIENT_CONFIG_FILE'] = os.path.join(
            here, '..', '..', 'target', 'openstack', 'clouds.yaml')
    conn = openstack.connect(cloud=args.cloud)
    try:
        conn.session.get_endpoint(service_type='orchestration', interface='public')
    except Exception as e:
        fail('no orchestration endpoint in the catalog (run tests/openstack/heat.sh): %s' % e)

    print('create stack %s (%s resources)' % (args.name, len(TEMPLATE['resources'])), flush=True)
    t0 = time.monotonic()
    try:
        st = conn.orchestration.create_stack(name=args.name, template=TEMPLATE,
                                             timeout_mins=max(1, args.timeout // 60))
    except Exception as e:
        fail('create_stack: %s' % e)
    t_accept = time.monotonic() - t0
    stack_id = st.id
    rc = 0
    t_create = None
    try:
        st, _ = wait(conn, stack_id, 'CREATE_COMPLETE', args.timeout)
        t_create = time.monotonic() - t0
        outs = {o['output_key']: o.get('output_value') for o in (st.outputs or [])}
        print('  outputs: %s' % json.dumps(outs, sort_keys=True))
        srv = conn.compute.get_server(outs['server_id'])
        fip = conn.network.get_ip(outs['fip_id'])
        port = conn.network.get_port(outs['port_id'])
        ok = (srv.status == 'ACTIVE' and fip.port_id == port.id
              and fip.fixed_ip_address == outs['fixed_ip'] and port.device_id == srv.id)
        print('  nova server %s %s; port %s %s (device %s); floating ip %s -> %s on port %s' % (
            srv.id, srv.status, port.id, port.status, port.device_id,
            fip.floating_ip_address, fip.fixed_ip_address, fip.port_id))
        if not ok:
            raise RuntimeError('stack is CREATE_COMPLETE but the cloud disagrees (see above)')
        print(timeline(conn, st, 'CREATE'))
        print('CREATE_COMPLETE: accepted in %.2fs, complete in %.2fs' % (t_accept, t_create),
              flush=True)
    except RuntimeError as e:
        print('FAILED create:\n%s' % e, file=sys.stderr)
        rc = 1
    if args.keep:
        print('kept stack %s (%s)' % (args.name, stack_id))
        return rc

    print('delete stack %s' % args.name, flush=True)
    t1 = time.monotonic()
    try:
        conn.orchestration.delete_stack(stack_id)
        wait(conn, stack_id, 'DELETE_COMPLETE', args.timeout)
        t_delete = time.monotonic() - t1
        if t_create is not None:
            left = [x for x in [conn.compute.find_server(outs['server_id'], ignore_missing=True),
                                conn.network.find_port(outs['port_id'], ignore_missing=True),
                                conn.network.find_ip(outs['fip_id'], ignore_missing=True)] if x]
            if left:
                raise RuntimeError('left behind after DELETE_COMPLETE: %s' % [x.id for x in left])
        print('DELETE_COMPLETE in %.2fs' % t_delete)
    except RuntimeError as e:
        print('FAILED delete:\n%s' % e, file=sys.stderr)
        return 1
    if rc == 0:
        print('heat smoke ok: create %.2fs, delete %.2fs' % (t_create, t_delete))
    return rc


if __name__ == '__main__':
    sys.exit(main())
