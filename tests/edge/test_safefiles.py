"""State and lock directories: where they are, how they are created and refused, if shared."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cronctl.edge.dirs import default_state_dir, resolve_dirs
from cronctl.edge.dirwarnings import filesystem_type, is_shared_fstype
from cronctl.edge.safefiles import ensure_private_dir, open_nofollow, verify_dir, write_atomic
from cronctl.errors import UnsafeDirectoryError, UsageError

# --- default_state_dir / resolve_dirs -------------------------------------------------------


def test_root_keeps_state_in_var_lib() -> None:
    assert default_state_dir({"HOME": "/root"}, is_root=True) == Path("/var/lib/cronctl")


def test_user_state_follows_xdg_state_home() -> None:
    env = {"HOME": "/home/ann", "XDG_STATE_HOME": "/data/state"}
    assert default_state_dir(env, is_root=False) == Path("/data/state/cronctl")


@pytest.mark.parametrize("xdg", [None, "", "relative/state"])
def test_user_state_falls_back_to_local_state_without_usable_xdg(xdg: str | None) -> None:
    env = {"HOME": "/home/ann"} | ({} if xdg is None else {"XDG_STATE_HOME": xdg})
    assert default_state_dir(env, is_root=False) == Path("/home/ann/.local/state/cronctl")


def _resolve(
    env: dict[str, str] | None = None,
    *,
    flag_state: str | None = None,
    flag_lock: str | None = None,
    file_state: str | None = None,
    file_lock: str | None = None,
) -> tuple[Path, Path]:
    return resolve_dirs(
        flag_state=None if flag_state is None else Path(flag_state),
        flag_lock=None if flag_lock is None else Path(flag_lock),
        env={"HOME": "/home/ann"} | (env or {}),
        file_state=None if file_state is None else Path(file_state),
        file_lock=None if file_lock is None else Path(file_lock),
        is_root=False,
    )


ENV = {"CRONCTL_STATE_DIR": "/env/state", "CRONCTL_LOCK_DIR": "/env/locks"}
UNIT = {"STATE_DIRECTORY": "/var/lib/cronctl"}
TWO = {"STATE_DIRECTORY": "/var/lib/cronctl:/var/lib/other"}
RELATIVE = {"STATE_DIRECTORY": "relative"}  # not systemd's: ignored


@pytest.mark.parametrize(
    ("env", "flags", "files", "expected"),
    [
        ({}, {}, {}, ("/home/ann/.local/state/cronctl", "/home/ann/.local/state/cronctl/locks")),
        ({}, {}, {"file_state": "/f/state"}, ("/f/state", "/f/state/locks")),
        ({}, {}, {"file_lock": "/f/locks"}, ("/home/ann/.local/state/cronctl", "/f/locks")),
        (ENV, {}, {"file_state": "/f/s", "file_lock": "/f/l"}, ("/env/state", "/env/locks")),
        (ENV, {"flag_state": "/flag/s"}, {}, ("/flag/s", "/env/locks")),
        ({}, {"flag_state": "/flag/s"}, {"file_lock": "/f/l"}, ("/flag/s", "/f/l")),
        (ENV, {"flag_state": "/flag/s", "flag_lock": "/flag/l"}, {}, ("/flag/s", "/flag/l")),
        # systemd's StateDirectory= comes after every setting, before the default.
        (UNIT, {}, {}, ("/var/lib/cronctl", "/var/lib/cronctl/locks")),
        (UNIT, {}, {"file_state": "/f/s"}, ("/f/s", "/f/s/locks")),
        (UNIT | ENV, {}, {}, ("/env/state", "/env/locks")),
        (UNIT, {"flag_state": "/flag/s"}, {}, ("/flag/s", "/flag/s/locks")),
        (UNIT, {}, {"file_lock": "/f/l"}, ("/var/lib/cronctl", "/f/l")),
        (TWO, {}, {}, ("/var/lib/cronctl", "/var/lib/cronctl/locks")),
        (
            RELATIVE,
            {},
            {},
            ("/home/ann/.local/state/cronctl", "/home/ann/.local/state/cronctl/locks"),
        ),
    ],
)
def test_each_directory_takes_the_first_of_flag_env_file_unit_default(
    env: dict[str, str],
    flags: dict[str, str],
    files: dict[str, str],
    expected: tuple[str, str],
) -> None:
    assert _resolve(env, **flags, **files) == (Path(expected[0]), Path(expected[1]))


@pytest.mark.parametrize("name", ["CRONCTL_STATE_DIR", "CRONCTL_LOCK_DIR"])
def test_an_empty_environment_variable_is_a_usage_error_naming_it(name: str) -> None:
    # It used to count as unset: CRONCTL_STATE_DIR="" reached /var/lib/cronctl for root.
    with pytest.raises(UsageError, match=name):
        _resolve({name: ""})


def test_relative_flag_is_made_absolute_against_the_current_directory() -> None:
    state, lock = _resolve(flag_state="rel/state")
    assert state == Path.cwd() / "rel/state"
    assert lock == Path.cwd() / "rel/state/locks"


# --- ensure_private_dir ---------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_missing_directory_and_parents_are_created_0700(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "state"
    old_umask = os.umask(0o022)
    try:
        assert ensure_private_dir(target) == target
    finally:
        os.umask(old_umask)
    for directory in (tmp_path / "a", tmp_path / "a" / "b", target):
        assert _mode(directory) == 0o700


def test_restrictive_umask_does_not_change_the_mode_of_created_dirs(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2770)
    old_umask = os.umask(0o077)
    try:
        ensure_private_dir(shared / "cronctl")
    finally:
        os.umask(old_umask)
    assert _mode(shared / "cronctl") == 0o2750


def test_directory_under_setgid_parent_is_created_group_readable(tmp_path: Path) -> None:
    shared = tmp_path / "team"
    shared.mkdir()
    shared.chmod(0o2775)
    created = ensure_private_dir(shared / "state" / "locks")
    assert _mode(shared / "state") == 0o2750
    assert _mode(created) == 0o2750


def test_group_writable_parent_without_setgid_still_gets_0700(tmp_path: Path) -> None:
    parent = tmp_path / "g"
    parent.mkdir()
    parent.chmod(0o775)
    assert _mode(ensure_private_dir(parent / "state")) == 0o700


def test_existing_safe_directory_is_accepted_and_left_alone(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    existing.chmod(0o755)
    assert ensure_private_dir(existing) == existing
    assert _mode(existing) == 0o755


@pytest.mark.parametrize("mode", [0o777, 0o1777], ids=["plain", "sticky"])
def test_world_writable_directory_is_refused_sticky_bit_or_not(tmp_path: Path, mode: int) -> None:
    # docs/guarantees.md, Safety: with 1777 another user could still plant `logs`, `paused/`
    # or state.db itself.
    unsafe = tmp_path / "open"
    unsafe.mkdir()
    unsafe.chmod(mode)
    with pytest.raises(UnsafeDirectoryError) as caught:
        ensure_private_dir(unsafe)
    message = str(caught.value)
    assert str(unsafe) in message
    assert "world-writable" in message
    if mode & 0o1000:  # a shared directory like /tmp is never to be closed: use one of its own
        assert "chmod" not in message and f"mkdir -m 700 {unsafe}/cronctl" in message
    else:
        assert f"chmod o-w {unsafe}" in message
    assert caught.value.path == unsafe


def test_group_writable_directory_is_refused_unless_setgid_shared(tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o770)
    with pytest.raises(UnsafeDirectoryError, match="writable by its group"):
        ensure_private_dir(loose)
    loose.chmod(0o2770)
    assert ensure_private_dir(loose) == loose


@pytest.mark.parametrize("child", ["logs", "notices", "claims", "paused", "overlap", "locks"])
def test_a_symlink_planted_at_a_known_subdirectory_is_refused_with_its_parent(
    tmp_path: Path, child: str
) -> None:
    state = ensure_private_dir(tmp_path / "state")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state / child).symlink_to(elsewhere)
    with pytest.raises(UnsafeDirectoryError, match="symbolic link") as caught:
        ensure_private_dir(state)
    assert caught.value.path == state / child


def test_a_directory_inside_is_never_created_through_a_planted_link(tmp_path: Path) -> None:
    state = ensure_private_dir(tmp_path / "state")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (state / "logs").symlink_to(elsewhere)
    with pytest.raises(UnsafeDirectoryError, match="symbolic link"):
        ensure_private_dir(state / "logs" / "backup", within=state)
    assert list(elsewhere.iterdir()) == []


def test_every_directory_between_within_and_the_leaf_is_created_and_checked(
    tmp_path: Path,
) -> None:
    state = ensure_private_dir(tmp_path / "state")
    leaf = ensure_private_dir(state / "logs" / "backup", within=state)
    assert leaf == state / "logs" / "backup"
    assert _mode(state / "logs") == _mode(leaf) == 0o700
    (state / "logs").chmod(0o777)
    with pytest.raises(UnsafeDirectoryError, match="world-writable"):
        ensure_private_dir(leaf, within=state)


def test_verify_dir_creates_nothing_and_says_whether_it_exists(tmp_path: Path) -> None:
    assert verify_dir(tmp_path / "missing") is False
    assert verify_dir(tmp_path / "a" / "b", within=tmp_path) is False
    assert not (tmp_path / "missing").exists() and not (tmp_path / "a").exists()
    assert verify_dir(tmp_path) is True


@pytest.mark.parametrize("name", ["state.db", "state.db-wal", "state.db-shm"])
def test_a_symlink_at_the_state_database_or_its_sqlite_files_is_refused(
    tmp_path: Path, name: str
) -> None:
    state = ensure_private_dir(tmp_path / "state")
    (state / name).symlink_to(tmp_path / "attacker.db")
    with pytest.raises(UnsafeDirectoryError, match="symbolic link"):
        ensure_private_dir(state)


def _chown_or_skip(path: Path, uid: int) -> None:
    try:
        os.chown(path, uid, -1, follow_symlinks=False)
    except PermissionError:
        pytest.skip("changing a file's owner needs root")


@pytest.mark.parametrize("name", ["state.db", "state.db-wal", "state.db-shm"])
def test_a_state_database_owned_by_another_user_is_refused(tmp_path: Path, name: str) -> None:
    state = ensure_private_dir(tmp_path / "state")
    (state / name).write_bytes(b"")
    _chown_or_skip(state / name, 54321)
    with pytest.raises(UnsafeDirectoryError, match="owned by uid 54321"):
        ensure_private_dir(state)


def test_open_nofollow_refuses_a_file_owned_by_another_user(tmp_path: Path) -> None:
    planted = tmp_path / "t.pause"
    planted.write_text("{}")
    _chown_or_skip(planted, 54321)
    with pytest.raises(UnsafeDirectoryError, match="owned by uid 54321"):
        open_nofollow(planted, os.O_RDONLY)


def test_open_nofollow_refuses_a_world_writable_file(tmp_path: Path) -> None:
    loose = tmp_path / "x.log"
    loose.write_text("")
    loose.chmod(0o666)
    with pytest.raises(UnsafeDirectoryError, match="world-writable"):
        open_nofollow(loose, os.O_RDONLY)


def test_directory_owned_by_another_ordinary_user_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    try:
        os.chown(foreign, 54321, -1)
    except PermissionError:
        pytest.skip("changing a directory's owner needs root")
    with pytest.raises(UnsafeDirectoryError, match="owned by uid 54321"):
        ensure_private_dir(foreign)


def test_directory_owned_by_root_is_accepted(tmp_path: Path) -> None:
    if tmp_path.stat().st_uid != 0:
        pytest.skip("needs a root-owned directory")
    assert ensure_private_dir(tmp_path) == tmp_path


def test_symlink_at_the_final_component_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UnsafeDirectoryError, match="symbolic link"):
        ensure_private_dir(link)


def test_symlink_in_a_parent_component_is_followed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    ensure_private_dir(tmp_path / "alias" / "state")
    assert (real / "state").is_dir()


def test_a_file_where_the_directory_should_be_is_refused(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("oops")
    with pytest.raises(UnsafeDirectoryError, match="not a directory"):
        ensure_private_dir(tmp_path / "state")


# --- files inside the directories -----------------------------------------------------------


def test_open_nofollow_refuses_a_planted_symlink(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("precious")
    (tmp_path / "file").symlink_to(target)
    with pytest.raises(UnsafeDirectoryError, match="symbolic link"):
        open_nofollow(tmp_path / "file", os.O_WRONLY | os.O_TRUNC)
    assert target.read_text() == "precious"


def test_open_nofollow_refuses_a_planted_fifo_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafeDirectoryError, match="not a regular file"):
        open_nofollow(tmp_path / "fifo", os.O_RDONLY)


def test_write_atomic_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("precious")
    (tmp_path / "record").symlink_to(target)
    write_atomic(tmp_path / "record", b"new", 0o600)
    assert target.read_text() == "precious"
    assert not (tmp_path / "record").is_symlink()
    assert (tmp_path / "record").read_bytes() == b"new"
    assert _mode(tmp_path / "record") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record", "target"]


# --- mountinfo ------------------------------------------------------------------------------

# Lines recorded from real machines (proc(5) format), trimmed of unrelated mounts.
MOUNTINFO = "\n".join(
    [
        "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/mapper/vg-root rw,errors=remount-ro",
        "25 22 0:23 / /tmp rw,nosuid,nodev shared:14 - tmpfs tmpfs rw,size=8140936k",
        "101 22 0:52 / /mnt/shared rw,relatime shared:60 - nfs4 fs1.example.com:/export/cron"
        " rw,vers=4.2,rsize=1048576,wsize=1048576,hard,proto=tcp,sec=sys",
        "102 22 0:53 / /mnt/win\\040share rw,relatime shared:61 master:7 - cifs"
        " //filer/cron\\040jobs rw,vers=3.1.1,cache=strict,username=svc",
        "103 22 0:54 / /mnt/ceph rw,relatime shared:62 - ceph"
        " 10.0.0.1:6789,10.0.0.2:6789:/cron rw,name=cron,acl",
        "104 101 0:55 / /mnt/shared/local rw,relatime - ext4 /dev/sdb1 rw",
        "105 22 0:56 / /var/lib/docker/overlay2/x/merged rw - overlay overlay rw,lowerdir=/l",
        "not a mountinfo line",
    ]
)


@pytest.mark.parametrize(
    ("path", "fstype"),
    [
        ("/mnt/shared/cronctl/locks", "nfs4"),
        ("/mnt/shared", "nfs4"),
        ("/mnt/sharedother/locks", "ext4"),
        ("/mnt/shared/local/locks", "ext4"),
        ("/mnt/win share/locks", "cifs"),
        ("/mnt/ceph/cronctl", "ceph"),
        ("/tmp/x", "tmpfs"),
        ("/var/lib/cronctl", "ext4"),
    ],
)
def test_filesystem_type_is_the_longest_containing_mount(path: str, fstype: str) -> None:
    assert filesystem_type(Path(path), MOUNTINFO) == fstype


def test_the_last_of_stacked_mounts_on_one_point_wins() -> None:
    stacked = MOUNTINFO + "\n200 22 0:60 / /mnt/shared rw - tmpfs tmpfs rw"
    assert filesystem_type(Path("/mnt/shared/locks"), stacked) == "tmpfs"


def test_filesystem_type_is_unknown_when_nothing_matches() -> None:
    assert filesystem_type(Path("/srv"), "") == "unknown"


def test_filesystem_type_resolves_symlinks_first(tmp_path: Path) -> None:
    link = tmp_path / "locks"
    link.symlink_to("/mnt/shared/cronctl")
    assert filesystem_type(link, MOUNTINFO) == "nfs4"


def test_tmp_path_on_this_machine_is_a_local_file_system(tmp_path: Path) -> None:
    if not Path("/proc/self/mountinfo").exists():
        pytest.skip("needs Linux /proc")
    fstype = filesystem_type(tmp_path)
    assert fstype != "unknown"
    assert not is_shared_fstype(fstype)


@pytest.mark.parametrize(
    "fstype",
    [
        *("nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "fuse.glusterfs"),
        *("lustre", "gpfs", "beegfs", "ocfs2", "gfs2", "NFS4"),
    ],
)
def test_network_and_cluster_file_systems_are_shared(fstype: str) -> None:
    assert is_shared_fstype(fstype)


@pytest.mark.parametrize(
    "fstype",
    ["ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "fuse.sshfs", "9p", "virtiofs", "unknown"],
)
def test_local_and_doubtful_file_systems_are_not_shared(fstype: str) -> None:
    assert not is_shared_fstype(fstype)


# --- the once-a-day notice stamp (cronctl.edge.dirs) ---------------------------------------------


def test_the_notice_stamp_is_never_touched_through_a_planted_link(tmp_path: Path) -> None:
    from cronctl.edge.dirwarnings import daily_notice

    state = ensure_private_dir(tmp_path / "state")
    (state / "notices").mkdir(mode=0o700)
    target = tmp_path / "precious"
    target.write_text("keep\n")
    os.utime(target, (0, 0))
    (state / "notices" / "lock-dir-not-shared").symlink_to(target)
    with pytest.raises(UnsafeDirectoryError, match="symbolic link"):
        daily_notice(state, "lock-dir-not-shared")
    assert target.read_text() == "keep\n"
    assert target.stat().st_mtime == 0


def test_the_notice_is_given_once_a_day(tmp_path: Path) -> None:
    from cronctl.edge.dirwarnings import daily_notice

    state = ensure_private_dir(tmp_path / "state")
    assert daily_notice(state, "k") is True
    assert daily_notice(state, "k") is False
    stamp = state / "notices" / "k"
    os.utime(stamp, (0, 0))
    assert daily_notice(state, "k") is True
