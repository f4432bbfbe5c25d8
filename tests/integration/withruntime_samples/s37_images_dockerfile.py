"""images.build with a Dockerfile, as Runtime's client sends it: a folder
packed by the client (.dockerignore applied, a gzipped tar uploaded in 1 MiB
chunks, PUT /v1/images/context/<hex>), and small inline files= without a
name (an unnamed image is addressed by its id)."""
import hashlib
import os
import tempfile
import uuid

import withruntime
from withruntime import Runtime

runtime = Runtime()
name = "web-" + uuid.uuid4().hex[:6]
folder = tempfile.mkdtemp(prefix="kiln-wr-context-")
big = os.urandom(1536 * 1024)  # incompressible: the archive is two chunks
os.makedirs(os.path.join(folder, "src"))
files = {"Dockerfile": b"FROM base\nUSER root\nWORKDIR /app\nCOPY . /app/\nRUN python3 src/main.py > /app/out.txt\n",
         "src/main.py": b"print('built from a folder')\n",
         "blob.bin": big,
         "secret.txt": b"not for the image\n",
         ".dockerignore": b"secret.txt\n"}
for path, data in files.items():
    with open(os.path.join(folder, path), "wb") as f:
        f.write(data)

packed = withruntime._sync_products.images.pack_context(folder)
assert len(packed["chunks"]) == 2, len(packed["chunks"])
lines = []
image = runtime.images.build(name=name, dockerfile=files["Dockerfile"].decode(), context_dir=folder,
                             on_log=lambda line: lines.append(line))
print(image["id"], image["state"], image["name"], len(lines), "log lines")
assert image["state"] == "ready" and image["name"] == name, image
sbx = runtime.sandboxes.create(image=name)
try:
    assert sbx.exec("cat /app/out.txt").stdout == "built from a folder\n"
    assert sbx.exec("sha256sum /app/blob.bin | cut -d' ' -f1").stdout.strip() == hashlib.sha256(big).hexdigest()
    assert sbx.exec("test -e /app/secret.txt").exit_code != 0  # left out by .dockerignore
finally:
    sbx.delete()

# The same folder again: its chunks are asked for and the build goes on.
again = runtime.images.build(name=name, dockerfile=files["Dockerfile"].decode(), context_dir=folder)
assert again["state"] == "ready" and again["version"] == 2, again

# Inline files, no name.
unnamed = runtime.images.build(dockerfile="FROM base\nCOPY app/hello.py /opt/hello.py\n",
                               files={"app/hello.py": "print(6 * 7)\n"})
print(unnamed["id"], unnamed["name"])
assert unnamed["state"] == "ready" and unnamed["name"] is None, unnamed
sbx = runtime.sandboxes.create(image=unnamed["id"])
try:
    assert sbx.exec("python3 /opt/hello.py").stdout == "42\n"
finally:
    sbx.delete()

# A file outside the context is refused by name.
try:
    runtime.images.create(dockerfile="FROM base\n", files={"../escape": "x"})
    raise AssertionError("a file path with .. was taken")
except withruntime.RuntimeError as error:
    assert error.status == 400 and "body.files[0].path" in error.message, error
for image_id in (image["id"], again["id"], unnamed["id"]):
    runtime.images.delete(image_id)
