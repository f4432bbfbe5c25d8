"""E2B's own SDKs (Python e2b 2.63.0, JS e2b 2.51.0) unchanged against kilnd's
E2B control plane (src/api/e2b/routes*.cc): create, list, get_info, connect,
set_timeout, pause and resume with memory kept, kill; the sandboxes are
ordinary kiln sandboxes (kiln's /v1 shows them), another key's are 404, a
wrong key is E2B's 401, refusals are E2B's error shape naming the feature.

Memory across a pause is checked through the code interpreter's port
(49999), which kilnd serves itself; envd (commands, files) lands separately.
"""
import pytest

from e2b_clients import (GROUP, e2b_env, e2b_http, e2b_key, e2b_node, e2b_python,  # noqa: F401
                         run_node, run_python)

pytestmark = GROUP


@pytest.fixture(scope="module")
def other_env(api, e2b_env):
    """E2B's environment with a second key of its own."""
    secret = api.ok("POST", "/v1/keys", json={"name": "e2b-other"})["secret"]
    return dict(e2b_env, E2B_API_KEY="e2b_" + secret[len("kiln_"):])


def test_python_create_info_list_timeout_and_kill(e2b_python, e2b_env, api):
    out = run_python(e2b_python, e2b_env, """
        from datetime import datetime, timezone
        from e2b import Sandbox, SandboxQuery
        s = Sandbox.create("base", timeout=120, metadata={"suite": "e2b-control", "n": "1"},
                           envs={"GREETING": "hello"})
        info = s.get_info()
        listed = [x.sandbox_id for x in
                  Sandbox.list(query=SandboxQuery(metadata={"suite": "e2b-control"})).next_items()]
        other = [x.sandbox_id for x in
                 Sandbox.list(query=SandboxQuery(metadata={"suite": "nothing"})).next_items()]
        left0 = (info.end_at - datetime.now(timezone.utc)).total_seconds()
        s.set_timeout(30)
        left1 = (s.get_info().end_at - datetime.now(timezone.utc)).total_seconds()
        s.set_timeout(600)
        left2 = (s.get_info().end_at - datetime.now(timezone.utc)).total_seconds()
        out({"id": s.sandbox_id, "template": info.template_id, "metadata": info.metadata,
             "state": str(info.state.value), "cpu": info.cpu_count, "listed": s.sandbox_id in listed,
             "other": s.sandbox_id in other, "left": [left0, left1, left2],
             "envd": s.envd_api_url if hasattr(s, "envd_api_url") else None})
    """)
    sid = out["id"]
    assert out["template"] == "base"
    assert out["metadata"] == {"suite": "e2b-control", "n": "1"}
    assert out["state"] == "running" and out["listed"] and not out["other"]
    left0, left1, left2 = out["left"]
    assert 100 < left0 <= 121 and 20 < left1 <= 31 and 590 < left2 <= 601, out["left"]
    # An ordinary kiln sandbox: kiln's own API shows it, labels and env.
    s = api.ok("GET", f"/v1/sandboxes/{sid}")
    assert s["labels"] == {"suite": "e2b-control", "n": "1"}, s
    assert api.sh(sid, "echo $GREETING").strip() == "hello"
    out = run_python(e2b_python, e2b_env, f"""
        from e2b import Sandbox
        from e2b.exceptions import NotFoundException
        first = Sandbox.kill("{sid}")
        again = Sandbox.kill("{sid}")
        try:
            Sandbox.get_info("{sid}")
            gone = False
        except NotFoundException:
            gone = True
        out({{"first": first, "again": again, "gone": gone}})
    """)
    assert out == {"first": True, "again": False, "gone": True}


def test_python_connect_pause_and_resume_keep_memory(e2b_python, e2b_env):
    sid = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create("base", timeout=300)
        r = s.run_code("kept = 41")
        assert r.error is None, r.error
        out({"id": s.sandbox_id})
    """)["id"]
    # Another process connects by id, pauses, and a third resumes it.
    out = run_python(e2b_python, e2b_env, f"""
        from e2b_code_interpreter import Sandbox
        s = Sandbox.connect("{sid}")
        before = s.get_info().state.value
        paused = s.beta_pause()
        again = Sandbox.beta_pause("{sid}") if hasattr(Sandbox, "beta_pause") else None
        state = Sandbox.get_info("{sid}").state.value
        from e2b import Sandbox as Plain, SandboxQuery, SandboxState
        paused_list = [x.sandbox_id for x in Plain.list(
            query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()]
        out({{"before": before, "paused": paused, "again": again, "state": state,
              "listed": "{sid}" in paused_list}})
    """)
    assert out["before"] == "running" and out["paused"] is True and out["again"] is False, out
    assert out["state"] == "paused" and out["listed"], out
    out = run_python(e2b_python, e2b_env, f"""
        from e2b_code_interpreter import Sandbox
        s = Sandbox.connect("{sid}", timeout=120)
        r = s.run_code("kept + 1")
        state = s.get_info().state.value
        s.kill()
        out({{"text": r.text, "state": state}})
    """)
    assert out == {"text": "42", "state": "running"}, out


def test_another_keys_sandbox_is_not_found(e2b_python, e2b_env, other_env):
    sid = run_python(e2b_python, e2b_env, """
        from e2b import Sandbox
        out({"id": Sandbox.create("base", timeout=120).sandbox_id})
    """)["id"]
    out = run_python(e2b_python, other_env, f"""
        from e2b import Sandbox
        from e2b.exceptions import NotFoundException
        res = {{}}
        for name, call in [("info", lambda: Sandbox.get_info("{sid}")),
                           ("connect", lambda: Sandbox.connect("{sid}")),
                           ("timeout", lambda: Sandbox.set_timeout("{sid}", 60)),
                           ("pause", lambda: Sandbox.beta_pause("{sid}"))]:
            try:
                call()
                res[name] = "served"
            except NotFoundException:
                res[name] = "not found"
        res["kill"] = Sandbox.kill("{sid}")
        res["listed"] = "{sid}" in [x.sandbox_id for x in Sandbox.list().next_items()]
        out(res)
    """)
    assert out == {"info": "not found", "connect": "not found", "timeout": "not found",
                   "pause": "not found", "kill": False, "listed": False}, out
    run_python(e2b_python, e2b_env, f"""
        from e2b import Sandbox
        out(Sandbox.kill("{sid}"))
    """)


def test_wrong_keys_get_e2bs_401(kilnd, e2b_python, e2b_env, e2b_key):
    for key in ("e2b_" + "0" * 40, "e2b_not-hex", "sk-something", ""):
        status, body = e2b_http(kilnd, "GET", "/v2/sandboxes", key)
        assert status == 401, (key, status, body)
        assert body["code"] == 401 and body["message"], body
    out = run_python(e2b_python, dict(e2b_env, E2B_API_KEY="e2b_" + "0" * 40), """
        from e2b import Sandbox
        from e2b.exceptions import AuthenticationException
        try:
            Sandbox.create("base")
            out("created")
        except AuthenticationException as e:
            out("auth")
    """)
    assert out == "auth"
    # kiln's own spelling is the same key.
    status, _ = e2b_http(kilnd, "GET", "/v2/sandboxes", e2b_key[0])
    assert status == 200


def test_bad_bodies_and_refusals_in_e2bs_shape(kilnd, e2b_key):
    key = e2b_key[1]
    status, body = e2b_http(kilnd, "POST", "/v2/sandboxes", key, {"templateID": "base", "timeout": 0})
    assert status == 400 and body["code"] == 400 and "timeout" in body["message"], body
    status, body = e2b_http(kilnd, "POST", "/v2/sandboxes", key,
                            {"templateID": "no-such-template-here"})
    assert status == 404 and "no-such-template-here" in body["message"], body
    status, body = e2b_http(kilnd, "POST", "/v2/sandboxes", key,
                            {"templateID": "base", "volumeMounts": [{"name": "v", "path": "/v"}]})
    assert status == 501 and "volumeMounts" in body["message"], body
    for method, path, feature in [("GET", "/v2/sandboxes/x/logs", "logs"),
                                  ("PATCH", "/templates/base", "template updates"),
                                  ("GET", "/secrets", "secrets"),
                                  ("GET", "/volumes", "volumes")]:
        status, body = e2b_http(kilnd, method, path, key, {} if method == "POST" else None)
        assert status == 501 and body["code"] == 501 and feature in body["message"], (path, body)
    status, body = e2b_http(kilnd, "GET", "/nothing/here", key)
    assert status == 404 and body["code"] == 404, body
    status, body = e2b_http(kilnd, "GET", "/v2/sandboxes?state=stopped", key)
    assert status == 400 and "state" in body["message"], body


def test_templates_list_kilns_images(kilnd, e2b_key):
    status, body = e2b_http(kilnd, "GET", "/templates", e2b_key[1])
    assert status == 200
    base = [t for t in body if t["templateID"] == "base"]
    assert base and base[0]["public"] is True and base[0]["buildStatus"] == "ready", body
    status, body = e2b_http(kilnd, "GET", "/templates/aliases/base", e2b_key[1])
    assert status == 200 and body == {"templateID": "base", "public": True}


def test_list_pages_with_next_token(e2b_python, e2b_env):
    out = run_python(e2b_python, e2b_env, """
        from e2b import Sandbox, SandboxQuery
        made = [Sandbox.create("base", timeout=120, metadata={"page": "yes"}) for _ in range(3)]
        p = Sandbox.list(query=SandboxQuery(metadata={"page": "yes"}), limit=2)
        pages = []
        while p.has_next:
            pages.append([x.sandbox_id for x in p.next_items()])
        for s in made:
            s.kill()
        out({"pages": [len(x) for x in pages], "all": sorted(sum(pages, [])) ==
             sorted(s.sandbox_id for s in made)})
    """)
    assert out == {"pages": [2, 1], "all": True}, out


def test_js_create_info_list_timeout_pause_connect_kill(e2b_node, e2b_env, api):
    out = run_node(e2b_node, e2b_env, """
        import { Sandbox } from 'e2b'
        const s = await Sandbox.create('base', { timeoutMs: 120000, metadata: { suite: 'e2b-js' },
                                                 envs: { FROM_JS: 'yes' } })
        const info = await s.getInfo()
        const listed = (await Sandbox.list({ query: { metadata: { suite: 'e2b-js' } } }).nextItems())
          .map((x) => x.sandboxId)
        await s.setTimeout(45000)
        const left = (new Date((await s.getInfo()).endAt) - Date.now()) / 1000
        out({ id: s.sandboxId, template: info.templateId, metadata: info.metadata, state: info.state,
              listed: listed.includes(s.sandboxId), left })
    """)
    sid = out["id"]
    assert out["template"] == "base" and out["metadata"] == {"suite": "e2b-js"}, out
    assert out["state"] == "running" and out["listed"] and 35 < out["left"] <= 46, out
    assert api.ok("GET", f"/v1/sandboxes/{sid}")["labels"] == {"suite": "e2b-js"}
    assert api.sh(sid, "echo $FROM_JS").strip() == "yes"
    out = run_node(e2b_node, e2b_env, f"""
        import {{ Sandbox }} from 'e2b'
        const s = await Sandbox.connect('{sid}')
        const paused = await s.betaPause()
        const state = (await Sandbox.getInfo('{sid}')).state
        const back = await Sandbox.connect('{sid}', {{ timeoutMs: 120000 }})
        const after = (await back.getInfo()).state
        const killed = await Sandbox.kill('{sid}')
        const again = await Sandbox.kill('{sid}')
        out({{ paused, state, after, killed, again }})
    """)
    assert out == {"paused": True, "state": "paused", "after": "running", "killed": True,
                   "again": False}, out


def test_js_other_key_and_wrong_key(e2b_node, e2b_env, other_env):
    sid = run_node(e2b_node, e2b_env, """
        import { Sandbox } from 'e2b'
        out({ id: (await Sandbox.create('base', { timeoutMs: 120000 })).sandboxId })
    """)["id"]
    out = run_node(e2b_node, other_env, f"""
        import {{ Sandbox, NotFoundError, SandboxNotFoundError }} from 'e2b'
        let info
        try {{ await Sandbox.getInfo('{sid}'); info = 'served' }}
        catch (e) {{ info = e.constructor.name }}
        out({{ info, kill: await Sandbox.kill('{sid}') }})
    """)
    assert out["kill"] is False and "NotFound" in out["info"], out
    out = run_node(e2b_node, dict(e2b_env, E2B_API_KEY="e2b_" + "0" * 40), """
        import { Sandbox } from 'e2b'
        try { await Sandbox.create('base'); out('created') }
        catch (e) { out(e.name) }
    """)
    assert out == "AuthenticationError", out
    run_node(e2b_node, e2b_env, f"""
        import {{ Sandbox }} from 'e2b'
        out(await Sandbox.kill('{sid}'))
    """)


def test_python_snapshots_and_forks_carry_memory(e2b_python, e2b_env):
    out = run_python(e2b_python, e2b_env, """
        from e2b_code_interpreter import Sandbox
        s = Sandbox.create("base", timeout=300)
        s.run_code("v = 7")
        snap = s.create_snapshot()
        copy = Sandbox.create(snap.snapshot_id, timeout=120)
        from_snap = copy.run_code("v * 6").text
        copy_template = copy.get_info().template_id
        forks = s.fork(count=2, timeout=120)
        from_forks = [f.run_code("v + 1").text for f in forks]
        listed = snap.snapshot_id in [x.snapshot_id for x in Sandbox.list_snapshots().next_items()]
        for x in [copy, *forks, s]:
            x.kill()
        deleted = Sandbox.delete_snapshot(snap.snapshot_id)
        again = Sandbox.delete_snapshot(snap.snapshot_id)
        out({"from_snap": from_snap, "template": copy_template == snap.snapshot_id,
             "forks": from_forks, "listed": listed, "deleted": deleted, "again": again})
    """)
    assert out == {"from_snap": "42", "template": True, "forks": ["8", "8"], "listed": True,
                   "deleted": True, "again": False}, out


def test_network_maps_onto_kilns_egress_rules(e2b_python, e2b_env, api):
    out = run_python(e2b_python, e2b_env, """
        from e2b import Sandbox
        a = Sandbox.create("base", timeout=120)
        b = Sandbox.create("base", timeout=120, allow_internet_access=True)
        c = Sandbox.create("base", timeout=120,
                           network={"allow_out": ["example.com"], "deny_out": ["0.0.0.0/0"]})
        res = [[x.sandbox_id, x.get_info().allow_internet_access] for x in (a, b, c)]
        out(res)
    """)
    (a, a_open), (b, b_open), (c, c_open) = out
    assert (a_open, b_open, c_open) == (False, True, False), out
    net = {sid: api.ok("GET", f"/v1/sandboxes/{sid}/network") for sid in (a, b, c)}
    assert net[a]["internet"] is False and net[b]["internet"] is True, net
    assert net[c]["internet"] is True and net[c]["allow"] == ["example.com"], net
    for sid in (a, b, c):
        api.request("DELETE", f"/v1/sandboxes/{sid}")


def test_update_network_replaces_the_rules(e2b_python, e2b_env, api):
    """PUT /sandboxes/{id}/network (issue 44, item 4), as Harbor switches a task's phases:
    an allow list, offline, and back to E2B's default (the internet), each replacing the
    whole set; what kiln cannot express is refused by name and the rules stay."""
    out = run_python(e2b_python, e2b_env, """
        from e2b import Sandbox, ALL_TRAFFIC
        s = Sandbox.create("base", timeout=120, allow_internet_access=True)
        steps = []
        s.update_network({"allow_out": ["pypi.org", "*.pythonhosted.org"], "deny_out": [ALL_TRAFFIC]})
        steps.append("allow")
        s.update_network({"allow_internet_access": False})
        steps.append("offline")
        try:
            s.update_network({"allow_out": ["example.com"], "deny_out": ["10.0.0.0/8"]})
            steps.append("refused? no")
        except Exception as e:
            steps.append("refused: " + str(e))
        out([s.sandbox_id, steps])
    """)
    sid, steps = out
    try:
        assert steps[:2] == ["allow", "offline"], steps
        assert steps[2].startswith("refused") and "denyOut" in steps[2], steps
        net = api.ok("GET", f"/v1/sandboxes/{sid}/network")
        assert net["internet"] is False and net["allow"] == [], net  # the refusal changed nothing
        run_python(e2b_python, e2b_env, f"""
            from e2b import Sandbox
            Sandbox.connect({sid!r}).update_network({{"allow_out": ["pypi.org"], "deny_out": ["0.0.0.0/0"]}})
            out(True)
        """)
        net = api.ok("GET", f"/v1/sandboxes/{sid}/network")
        assert net["internet"] is True and net["allow"] == ["pypi.org"], net
        run_python(e2b_python, e2b_env, f"""
            from e2b import Sandbox
            Sandbox.connect({sid!r}).update_network({{}})
            out(True)
        """)
        net = api.ok("GET", f"/v1/sandboxes/{sid}/network")
        assert net["internet"] is True and net["allow"] == [] and net["deny"] == [], net
    finally:
        api.request("DELETE", f"/v1/sandboxes/{sid}")
