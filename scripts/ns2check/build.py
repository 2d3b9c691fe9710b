"""Building ns-2.35 with the timelost option from Debian's sources.

`patched_ns(cache)` returns an `ns` built from `apt-get source ns2` with
the patches in `patches/` applied (`ns-2.35-build.patch`, which lets the
upstream tree build against Debian's Tcl libraries, and
`ns-2.35-timelost.patch`, the option itself), building it when the cache
does not hold a build of these patches. Everything comes from the Debian
archive through apt: the source package (a `deb-src` entry is added for
the suites of the system's own `deb` entries when apt knows none) and the
build dependencies.

Debian's own packaging patches are not used: the upstream tree is
configured with its own `configure` against a directory of links to
Debian's Tcl, Tk, OTcl and TclCL files (where `configure` looks for them),
with `HAVE_INT64` left undefined as Debian's TclCL was built, and the C++98
dialect and Tcl 8.6's compatibility switches the 2011 sources need.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

PATCHES = Path(__file__).resolve().parent / "patches"
#: In the order they are applied.
PATCH_FILES = ("ns-2.35-build.patch", "ns-2.35-timelost.patch")
BUILD_DEPS = (
    "dpkg-dev",
    "g++",
    "make",
    "tcl-dev",
    "tk-dev",
    "libxext-dev",
    "libxt-dev",
    "libpcap0.8-dev",
    "libotcl1-dev",
    "tclcl",
    "libtclcl1-dev",
)
CCOPT = "-O2 -w -fpermissive -std=gnu++98 -DUSE_INTERP_RESULT -DUSE_INTERP_ERRORLINE"
LIB = "/usr/lib/x86_64-linux-gnu"


def _apt(*args: str) -> None:
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", *args], check=True, env=env, stdout=subprocess.DEVNULL)


def _has_source() -> bool:
    done = subprocess.run(
        ["apt-cache", "showsrc", "ns2"], capture_output=True, text=True, check=False
    )
    return "Package: ns2" in done.stdout


def ensure_deb_src() -> None:
    """Adds a `deb-src` entry for the system's own Debian `deb` entries
    when apt knows no source for ns2, then updates the lists."""
    if _has_source():
        return
    stanzas = []
    for path in glob.glob("/etc/apt/sources.list.d/*.sources"):
        for stanza in Path(path).read_text(encoding="utf-8").split("\n\n"):
            if re.search(r"^Types:.*\bdeb\b", stanza, re.M) and "debian" in stanza:
                stanzas.append(re.sub(r"^Types:.*$", "Types: deb-src", stanza.strip(), flags=re.M))
    lines = []
    legacy = Path("/etc/apt/sources.list")
    if legacy.is_file():
        for line in legacy.read_text(encoding="utf-8").splitlines():
            if line.startswith("deb ") and "debian" in line:
                lines.append("deb-src " + line[4:])
    if not stanzas and not lines:
        raise SystemExit("ns2-check: no Debian deb entry in apt's sources to add deb-src for")
    target = Path("/etc/apt/sources.list.d/rtolab-ns2-src")
    if stanzas:
        target.with_suffix(".sources").write_text("\n\n".join(stanzas) + "\n", encoding="utf-8")
    else:
        target.with_suffix(".list").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _apt("update", "-qq")


def _digest() -> str:
    h = hashlib.sha256(CCOPT.encode())
    for name in PATCH_FILES:
        h.update((PATCHES / name).read_bytes())
    return h.hexdigest()[:16]


def _prefix(root: Path) -> Path:
    """Links to Debian's Tcl/Tk/OTcl/TclCL files where ns-2's configure
    looks for them."""
    p = root / "prefix"
    shutil.rmtree(p, ignore_errors=True)
    (p / "include").mkdir(parents=True)
    (p / "lib").mkdir()
    (p / "bin").mkdir()
    headers = (
        glob.glob("/usr/include/tcl8.6/*.h")
        + glob.glob("/usr/include/tcl8.6/tcl-private/generic/*.h")
        + glob.glob("/usr/include/tcl8.6/tcl-private/unix/*.h")
        + glob.glob("/usr/include/tclcl/*.h")
        + ["/usr/include/otcl.h"]
    )
    for header in headers:
        link = p / "include" / Path(header).name
        if not link.exists():
            link.symlink_to(header)
    for lib in (
        "libtcl8.6.so",
        "libtk8.6.so",
        "libotcl.so",
        "libtclcl.so",
        "libtcl8.6.a",
        "libtk8.6.a",
        "libotcl.a",
        "libtclcl.a",
    ):
        if Path(LIB, lib).exists():
            (p / "lib" / lib).symlink_to(Path(LIB, lib))
    (p / "lib" / "tcl8.6").symlink_to("/usr/share/tcltk/tcl8.6")
    (p / "lib" / "tk8.6").symlink_to("/usr/share/tcltk/tk8.6")
    for tool in ("tcl2c++", "tclsh8.6"):
        (p / "bin" / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    return p


def patched_ns(cache: Path, log=print) -> Path:  # noqa: ANN001
    """The patched `ns`, built in `cache` unless a build of the same
    patches is there."""
    binary = cache / "ns-2.35" / "ns"
    stamp = cache / "built-with"
    if binary.is_file() and stamp.is_file() and stamp.read_text().strip() == _digest():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    log("ns2-check: building ns-2.35 with the timelost patch (several minutes)")
    ensure_deb_src()
    _apt("install", "-y", "-qq", *BUILD_DEPS)
    orig = sorted(cache.glob("ns2_*.orig.tar.*"))
    if not orig:
        # The Debian packaging tarball is not needed (and not always on the
        # mirror): only the upstream tarball is used.
        subprocess.run(
            ["apt-get", "source", "--download-only", "ns2"],
            cwd=cache,
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        orig = sorted(cache.glob("ns2_*.orig.tar.*"))
    if not orig:
        raise SystemExit("ns2-check: apt-get source ns2 brought no ns2_*.orig.tar.* (deb-src?)")
    shutil.rmtree(cache / "ns-2.35", ignore_errors=True)
    with tarfile.open(orig[-1]) as tar:
        tar.extractall(cache, filter="data")
    tree = cache / "ns-2.35"
    prefix = _prefix(cache)
    subprocess.run(
        [
            "./configure",
            *(f"--with-{w}={prefix}" for w in ("tcl", "tk", "otcl", "tclcl")),
            "--with-tcl-ver=8.6",
            "--with-tk-ver=8.6",
        ],
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    autoconf = tree / "autoconf.h"
    autoconf.write_text(autoconf.read_text().replace("#define HAVE_INT64 1", "#undef HAVE_INT64"))
    for name in PATCH_FILES:
        subprocess.run(["patch", "-p1", "-s", "-i", str(PATCHES / name)], cwd=tree, check=True)
    jobs = str(os.cpu_count() or 1)
    done = subprocess.run(
        ["nice", "-n", "15", "make", "-j", jobs, "ns", f"CCOPT={CCOPT}"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not binary.is_file():
        tail = "\n".join(done.stderr.strip().splitlines()[-20:])
        raise SystemExit(f"ns2-check: building ns-2.35 failed:\n{tail}")
    stamp.write_text(_digest() + "\n")
    return binary
