# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST DOUBLE of nvidia-smi for hosts without an NVIDIA GPU (the CPU sandbox, the unit tests).

It answers the two calls the collection makes from saved nvidia-smi output of one fixture set,
chosen by FLEET_FAKE_NVIDIA_SMI (default h200: captured on a real H200 host) in
FLEET_FAKE_NVIDIA_SMI_DIR (default tests/unit/fixtures/nvidia-smi):

  nvidia-smi --query-gpu=F1,F2,... --format=csv,noheader,nounits
      the requested columns of <set>-query.csv (saved with --format=csv,nounits, header included),
      or of <set>-query-gpu.txt (saved with --format=csv,noheader,nounits for CAPTURED_FIELDS);
      a field the set does not have: 'Field "F" is not a valid field to query.', exit 2
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


def path(suffix):
    return os.path.join(DIRECTORY, '%s-%s' % (NAME, suffix))


def main(argv):
    if os.path.exists(path('fail.txt')):
        with open(path('fail.txt')) as handle:
            sys.stdout.write(handle.read())
        return 9
    query = [a.split('=', 1)[1] for a in argv if a.startswith('--query-gpu=')]
    if not query:
        with open(path('nvidia-smi.txt')) as handle:
            sys.stdout.write(handle.read())
        return 0
    if os.path.exists(path('query.csv')):
        with open(path('query.csv')) as handle:
            rows = list(csv.reader(handle, skipinitialspace=True))
        header = [cell.split(' [')[0].strip() for cell in rows[0]]
    else:
        with open(path('query-gpu.txt')) as handle:
            rows = [CAPTURED_FIELDS] + list(csv.reader(handle, skipinitialspace=True))
        header = CAPTURED_FIELDS
    fields = query[0].split(',')
    for field in fields:
        if field not in header:
            sys.stdout.write('Field "%s" is not a valid field to query.\n\n' % field)
            return 2
    for row in rows[1:]:
        sys.stdout.write(', '.join(row[header.index(field)] for field in fields) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
