# Copyright: lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Copy a host's current unit files aside before a rollout and say what a rollback needs.

Usage: python3 fleet_backup.py BACKUP_DIR [--dry-run] --files PATH... --services NAME...

Run by playbooks/tasks/backup.yml with ansible.builtin.script: one round trip per host
instead of a stat, a copy and a systemctl call per file and service. Copies every PATH
that exists into BACKUP_DIR (created with mode 0700; copies 0600, named by basename) and
prints one JSON object:
  {"start": <epoch s>, "files": {PATH: existed}, "active": {NAME: ActiveState == active}}
With --dry-run (check mode) nothing is written.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time


def active_state(service):
    try:
        proc = subprocess.run(["systemctl", "show", "-p", "ActiveState", "--value", service + ".service"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True, check=False)
    except OSError:
        return ""
    return proc.stdout.strip()


def backup(backup_dir, files, services, dry_run=False):
    start = int(time.time())
    if not dry_run:
        if not os.path.isdir(backup_dir):
            os.makedirs(backup_dir)
        os.chmod(backup_dir, 0o700)
    existed = {}
    for path in files:
        existed[path] = os.path.isfile(path)
        if existed[path] and not dry_run:
            dest = os.path.join(backup_dir, os.path.basename(path))
            shutil.copyfile(path, dest)
            os.chmod(dest, 0o600)
    return {"start": start, "files": existed,
            "active": dict((name, active_state(name) == "active") for name in services)}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("backup_dir")
    parser.add_argument("--dry-run", action="store_true", help="only report, write nothing")
    parser.add_argument("--files", nargs="*", default=[])
    parser.add_argument("--services", nargs="*", default=[])
    args = parser.parse_args(argv)
    names = [os.path.basename(p) for p in args.files]
    if len(set(names)) != len(names):
        parser.error("two files share a basename: %s" % ", ".join(sorted(args.files)))
    print(json.dumps(backup(args.backup_dir, args.files, args.services, args.dry_run)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
