"""Each Slurm team's directory on the cluster's Lustre (``/fsx/teams/<team>``, root and the team's group, 2770), made
by the head node, the file system's no-squash client (docs/teams.md "Team directories").

The script is the same for every set of teams: the teams are data, :data:`TEAM_DIRECTORIES_LIST` (one line per
directory: ``<path under the mount> <uid> <gid> <mode> <team>``), which rides in the head node's live bundle
(:data:`gpucluster.render.slurm.headfiles.LIVE_PATHS`). Adding or removing a team rewrites that list in place, and
``gpucluster-team-directories.path`` runs the script again: nothing in the head node's user data or pinned bundle
names a team, so a team's change restarts nothing. The script checks each line before it acts (a path under
``/teams`` of one name, numeric ids, an octal mode): the live writer takes only that path, mode 0644, from the
cluster's own bucket, and the script still refuses a line it did not expect. Directories of teams that left the
config are kept (their data is the team's).
"""

from __future__ import annotations

from gpucluster.config.storage import TEAMS_DIRECTORY
from gpucluster.render.compute.node import LUSTRE_MOUNT_SCRIPT, LustreMount
from gpucluster.render.core import SERVICE_SANDBOX, WriteFile, render
from gpucluster.render.slurm.guard import systemd_unit
from gpucluster.render.slurm.names import SlurmContext
from gpucluster.resolve.slurm.identity import DeclaredIdentity
from gpucluster.resolve.storage.team import TeamDirectory, slurm_team_directories

TEAM_DIRECTORIES_SCRIPT = "/usr/local/sbin/gpucluster-team-directories"
TEAM_DIRECTORIES_LIST = "/etc/gpucluster/team-directories.list"
TEAM_DIRECTORIES_UNIT = "gpucluster-team-directories.service"
TEAM_DIRECTORIES_PATH_UNIT = "gpucluster-team-directories.path"
LOG_DIRECTORY = "/var/log/gpucluster"


def team_directories(ctx: SlurmContext) -> tuple[TeamDirectory, ...]:
    """The Slurm teams' ``/teams/<team>`` directories (declared users: each team has a group named like it)."""
    source = ctx.identity.source if ctx.identity is not None else None
    if ctx.teams is None or not isinstance(source, DeclaredIdentity):
        return ()
    return slurm_team_directories((t.name for t in ctx.teams.teams), ((g.name, g.gid) for g in source.groups))


def team_directories_list(directories: tuple[TeamDirectory, ...]) -> str:
    """The list the script reads: ``<path> <uid> <gid> <mode> <team>`` per directory."""
    return "".join(f"{d.path} {d.uid} {d.gid} {d.mode} {d.team or '-'}\n" for d in directories)


def team_directories_script(ctx: SlurmContext, lustre: LustreMount) -> str:
    """``gpucluster-team-directories``: the directories the list names, on the mounted file system."""
    return render(
        "slurm/team-directories.sh.j2",
        cluster=ctx.cluster,
        mount_point=lustre.mount_point,
        mount_script=LUSTRE_MOUNT_SCRIPT,
        teams_directory=TEAMS_DIRECTORY,
        list_file=TEAM_DIRECTORIES_LIST,
    )


def team_directories_files(ctx: SlurmContext, lustre: LustreMount) -> tuple[WriteFile, ...]:
    """The script, its list (a live file) and the units that run it again when the list changes; none without
    team directories."""
    directories = team_directories(ctx)
    if not directories:
        return ()
    teams = f"{lustre.mount_point.rstrip('/')}{TEAMS_DIRECTORY}"
    return (
        WriteFile(TEAM_DIRECTORIES_SCRIPT, team_directories_script(ctx, lustre), "0755"),
        WriteFile(TEAM_DIRECTORIES_LIST, team_directories_list(directories)),
        WriteFile(
            f"/etc/systemd/system/{TEAM_DIRECTORIES_UNIT}",
            systemd_unit(
                "gpucluster: make the Slurm teams' directories on the cluster's Lustre",
                f"ConditionPathExists={TEAM_DIRECTORIES_LIST}\n\n[Service]\nType=oneshot\n"
                f"ExecStart={TEAM_DIRECTORIES_SCRIPT}\nReadWritePaths=-{teams} {LOG_DIRECTORY}\n" + SERVICE_SANDBOX,
            ),
        ),
        WriteFile(
            f"/etc/systemd/system/{TEAM_DIRECTORIES_PATH_UNIT}",
            systemd_unit(
                f"gpucluster: make the teams' directories again when {TEAM_DIRECTORIES_LIST} changes",
                f"\n[Path]\nPathChanged={TEAM_DIRECTORIES_LIST}\nUnit={TEAM_DIRECTORIES_UNIT}\n",
                "WantedBy=multi-user.target",
            ),
        ),
    )
