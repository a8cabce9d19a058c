# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST DOUBLE of nvidia-smi for hosts without an NVIDIA GPU (the CPU sandbox, the unit tests).

The only double of nvidia-smi. It answers the calls the collection makes from saved nvidia-smi
output of one fixture set, chosen by FLEET_FAKE_NVIDIA_SMI (default h200: captured on a real H200
host) in FLEET_FAKE_NVIDIA_SMI_DIR (default tests/unit/fixtures/nvidia-smi):

  nvidia-smi --query-gpu=F1,F2,... --format=csv,noheader,nounits
      the requested columns of <set>-query.csv (saved with --format=csv,nounits, header included),
      or of <set>-query-gpu.txt (saved with --format=csv,noheader,nounits for CAPTURED_FIELDS);
      a field the set does not have: 'Field "F" is not a valid field to query.', exit 2
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits
      no process, except the pids listed in the file FLEET_FAKE_NVIDIA_SMI_HOLD_PIDS_FILE (written by
      a vLLM test double): each holds 1024 MiB for the first FLEET_FAKE_NVIDIA_SMI_HOLD_CALLS calls
      (default: always); the calls are counted in <that file>.calls
  nvidia-smi (no argument)
      <set>-nvidia-smi.txt
  any call, when <set>-fail.txt exists
      that text, exit 9 (what nvidia-smi does when it cannot reach the driver)
"""

import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DIRECTORY = os.environ.get('FLEET_FAKE_NVIDIA_SMI_DIR') or os.path.join(HERE, '..', 'unit', 'fixtures', 'nvidia-smi')
NAME = os.environ.get('FLEET_FAKE_NVIDIA_SMI') or 'h200'
# The fields of the captured <set>-query-gpu.txt files, in their order.
CAPTURED_FIELDS = ['index', 'name', 'uuid', 'memory.total', 'memory.used', 'driver_version', 'compute_cap']
APPS_FIELDS = ['pid', 'used_memory']
HELD_MIB = 1024


def path(suffix):
    return os.path.join(DIRECTORY, '%s-%s' % (NAME, suffix))


def show(name):
    """Print the set's file ``<set>-<name>``; exit status 2 when the set has none."""
    if not os.path.exists(path(name)):
        sys.stderr.write('test double: the fixture set %s has no %s\n' % (NAME, path(name)))
        return 2
    with open(path(name), encoding='utf-8') as handle:
        sys.stdout.write(handle.read())
    return 0


def invalid(fields, known):
    for field in fields:
        if field not in known:
            sys.stdout.write('Field "%s" is not a valid field to query.\n\n' % field)
            return True
    return False


def query_gpu(fields):
    if os.path.exists(path('query.csv')):
        with open(path('query.csv'), encoding='utf-8') as handle:
            rows = list(csv.reader(handle, skipinitialspace=True))
        header = [cell.split(' [')[0].strip() for cell in rows[0]]
    else:
        with open(path('query-gpu.txt'), encoding='utf-8') as handle:
            rows = [CAPTURED_FIELDS] + list(csv.reader(handle, skipinitialspace=True))
        header = CAPTURED_FIELDS
    if invalid(fields, header):
        return 2
    for row in rows[1:]:
        sys.stdout.write(', '.join(row[header.index(field)] for field in fields) + '\n')
    return 0


def query_compute_apps(fields):
    if invalid(fields, APPS_FIELDS):
        return 2
    pids_file = os.environ.get('FLEET_FAKE_NVIDIA_SMI_HOLD_PIDS_FILE')
    if not pids_file:
        return 0
    counter = pids_file + '.calls'
    calls = 0
    if os.path.exists(counter):
        with open(counter, encoding='utf-8') as handle:
            calls = int(handle.read())
    with open(counter, 'w', encoding='utf-8') as handle:
        handle.write(str(calls + 1))
    if calls < int(os.environ.get('FLEET_FAKE_NVIDIA_SMI_HOLD_CALLS', '1000000')) and os.path.exists(pids_file):
        with open(pids_file, encoding='utf-8') as handle:
            for pid in handle.read().split():
                values = {'pid': pid, 'used_memory': str(HELD_MIB)}
                sys.stdout.write(', '.join(values[field] for field in fields) + '\n')
    return 0


def main(argv):
    if os.path.exists(path('fail.txt')):
        show('fail.txt')
        return 9
    for prefix, answer in (('--query-gpu=', query_gpu), ('--query-compute-apps=', query_compute_apps)):
        query = [a[len(prefix):] for a in argv if a.startswith(prefix)]
        if query:
            return answer(query[0].split(','))
    return show('nvidia-smi.txt')


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
