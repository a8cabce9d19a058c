# -*- coding: utf-8 -*-
# Copyright: (c) 2026, lmcache_vllm.fleet contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's engine launcher, a program run by the python of vLLM's venv
(``python -c <this file's source> MODEL FLAGS...``, see launch.engine_launcher_argv).

One process that builds vLLM's engine from the same ``vllm serve``
command line, without the API server and without the EngineCore process (with TP>1 the
workers are still processes of their own). vLLM's own parser (make_arg_parser), engine
arguments (AsyncEngineArgs.from_cli_args) and engine config (create_engine_config with the
API server's usage context) are used, then the executor vLLM would use is built in this
process; its worker loads the (dummy) model and vLLM computes and logs N exactly as it does
under ``vllm serve``. The launcher then prints ``fleet-probe: engine built: ...``
(block_size_log.ENGINE_BUILT_RE) and exits. Exit status 3 with :data:`UNSUPPORTED`: this vLLM lacks an
API the launcher needs (the module falls back to ``vllm serve``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import time

UNSUPPORTED = 'fleet-probe: engine launcher unsupported: '


def say(line):
    """One line on stdout, at once (the probe reads the log as it grows)."""
    sys.stdout.write(line + '\n')
    sys.stdout.flush()


def unsupported(e):
    """This vLLM lacks an API the launcher needs: exit 3 (the module falls back to ``vllm serve``)."""
    say(UNSUPPORTED + repr(e))
    raise SystemExit(3)


def vllm_api():
    """(FlexibleArgumentParser, make_arg_parser, validate_parsed_serve_args, AsyncEngineArgs,
    UsageContext, Executor) of this vLLM, wherever its version keeps them."""
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        try:
            from vllm.utils import FlexibleArgumentParser
        except ImportError as e:
            unsupported(e)
    try:
        try:
            from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
        except ImportError:
            from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.executor import Executor
    except ImportError as e:
        unsupported(e)
    return FlexibleArgumentParser, make_arg_parser, validate_parsed_serve_args, AsyncEngineArgs, UsageContext, Executor


def parse_serve_args(parser_class, make_arg_parser, validate_parsed_serve_args, argv):
    """What the vllm CLI does before, while and after it parses ``vllm serve``'s arguments."""
    try:
        from vllm.plugins import load_general_plugins
    except ImportError:
        load_general_plugins = None
    try:
        from vllm.entrypoints.serve.utils.api_utils import cli_env_setup
        cli_env_setup()
    except ImportError:
        os.environ.setdefault('VLLM_WORKER_MULTIPROC_METHOD', 'spawn')
    parser = make_arg_parser(parser_class(prog='vllm serve'))
    args = parser.parse_args(argv)
    if getattr(args, 'model_tag', None) is not None:
        args.model = args.model_tag
    try:
        from vllm.logger import configure_logging_from_args
        configure_logging_from_args(args)
    except ImportError:
        pass
    validate_parsed_serve_args(args)
    if load_general_plugins is not None:
        load_general_plugins()
    return args


def inspect_in_process(args):
    """With one worker, vLLM's check of the model class in a child interpreter (a fourth vLLM import,
    there to keep CUDA out of the API server) runs in this process: the engine runs here anyway."""
    world = int(getattr(args, 'tensor_parallel_size', 1) or 1) * int(getattr(args, 'pipeline_parallel_size', 1) or 1)
    if world != 1:
        return
    try:
        from vllm.model_executor.models import registry
        if hasattr(registry, '_run_in_subprocess'):
            registry._run_in_subprocess = lambda fn: fn()
    except ImportError:
        pass


def main():
    t0 = time.time()
    # keep the engine core in this process (vLLM's CPU platform then keeps the
    # uniprocess executor for TP=1)
    os.environ['VLLM_ENABLE_V1_MULTIPROCESSING'] = '0'
    parser_class, make_arg_parser, validate, engine_args_class, usage_context, executor = vllm_api()
    args = parse_serve_args(parser_class, make_arg_parser, validate, sys.argv[1:])
    inspect_in_process(args)
    engine_args = engine_args_class.from_cli_args(args)
    config = engine_args.create_engine_config(usage_context=usage_context.OPENAI_API_SERVER)
    executor_class = executor.get_class(config)
    say('fleet-probe: building the engine with %s after %.1f s' % (executor_class.__name__, time.time() - t0))
    executor_class(config)
    model = config.model_config
    say('fleet-probe: engine built: block_size=%d hybrid=%s after %.1f s' % (
        config.cache_config.block_size, bool(getattr(model, 'is_hybrid', False)), time.time() - t0))
    sys.stderr.flush()
    os._exit(0)


if __name__ == '__main__':
    main()
