"""python.md sample 20: list by labels and state, walking every page."""
from withruntime import Runtime

runtime = Runtime()
made = [runtime.sandboxes.create(labels={"team": "list-sample", "n": str(i)}) for i in range(3)]
other = runtime.sandboxes.create(labels={"team": "elsewhere"})
try:
    made[2].stop()
    found = [s.id for s in runtime.sandboxes.list(labels={"team": "list-sample"}, state=["running"])]
    print(found)
    assert found == [made[0].id, made[1].id], found
    page = runtime.sandboxes.list(labels={"team": "list-sample"}, state=["running"], limit=1)
    assert len(page.data) == 1 and page.has_more
    assert [s.id for s in page] == [made[0].id, made[1].id]
    assert other.id not in [s.id for s in runtime.sandboxes.list(labels={"team": "list-sample"})]
finally:
    for s in made + [other]:
        s.delete()
