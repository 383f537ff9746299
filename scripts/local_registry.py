#!/usr/bin/env python3
"""Turns the `.crate` files of `cargo package` into a local Cargo registry.

usage: local_registry.py REGISTRY_DIR CRATE_FILE...

REGISTRY_DIR gets a git index (`index/`, in Cargo's registry index format)
and the crate files (`crates/`), both reached through file:// URLs, so that
a crate outside the workspace can depend on the packaged crates exactly as it
would on crates.io: `rabbit-backoff = { version = "0.1", registry = "…" }`.
Dependencies on crates.io stay on crates.io.
"""

import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

CRATES_IO = "https://github.com/rust-lang/crates.io-index"


def index_path(name: str) -> Path:
    name = name.lower()
    if len(name) <= 2:
        return Path(str(len(name))) / name
    if len(name) == 3:
        return Path("3") / name[0] / name
    return Path(name[0:2]) / name[2:4] / name


def dependencies(manifest: dict, local: set[str]) -> list[dict]:
    """Every dependency of a normalized manifest, as an index entry lists it."""
    found = []

    def add(table: dict, kind: str, target: str | None) -> None:
        for key, spec in table.items():
            if isinstance(spec, str):
                spec = {"version": spec}
            package = spec.get("package", key)
            entry = {
                "name": key,
                "req": spec.get("version", "*"),
                "features": spec.get("features", []),
                "optional": spec.get("optional", False),
                "default_features": spec.get("default-features", True),
                "target": target,
                "kind": kind,
            }
            if package != key:
                entry["package"] = package
            if package not in local:
                entry["registry"] = CRATES_IO
            found.append(entry)

    def add_all(section: dict, target: str | None) -> None:
        add(section.get("dependencies", {}), "normal", target)
        add(section.get("build-dependencies", {}), "build", target)
        add(section.get("dev-dependencies", {}), "dev", target)

    add_all(manifest, None)
    for target, section in manifest.get("target", {}).items():
        add_all(section, target)
    return found


def main() -> None:
    registry = Path(sys.argv[1]).resolve()
    crates = [Path(p).resolve() for p in sys.argv[2:]]
    if registry.exists():
        shutil.rmtree(registry)
    (registry / "index").mkdir(parents=True)
    (registry / "crates").mkdir()

    manifests = {}
    for crate in crates:
        with tarfile.open(crate) as tar:
            member = next(m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/Cargo.toml"))
            manifests[crate] = tomllib.loads(tar.extractfile(member).read().decode())
    local = {m["package"]["name"] for m in manifests.values()}

    for crate, manifest in manifests.items():
        package = manifest["package"]
        name, version = package["name"], package["version"]
        shutil.copy(crate, registry / "crates" / f"{name}-{version}.crate")
        features = manifest.get("features", {})
        plain = {k: v for k, v in features.items() if not any(f.startswith("dep:") or "?" in f for f in v)}
        extended = {k: v for k, v in features.items() if k not in plain}
        entry = {
            "name": name,
            "vers": version,
            "deps": dependencies(manifest, local),
            "cksum": hashlib.sha256(crate.read_bytes()).hexdigest(),
            "features": plain,
            "yanked": False,
        }
        if extended:
            entry["features2"] = extended
            entry["v"] = 2
        if "links" in package:
            entry["links"] = package["links"]
        if "rust-version" in package:
            entry["rust_version"] = package["rust-version"]
        path = registry / "index" / index_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(json.dumps(entry) + "\n")

    config = {"dl": f"file://{registry}/crates/{{crate}}-{{version}}.crate"}
    (registry / "index" / "config.json").write_text(json.dumps(config) + "\n")
    git = ["git", "-C", str(registry / "index"), "-c", "user.name=package-check", "-c", "user.email=package-check@localhost"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "packaged crates"], check=True)
    print(f"registry with {len(crates)} crates: file://{registry}/index")


if __name__ == "__main__":
    main()
