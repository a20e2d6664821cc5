"""`aicf-induct serve` and `aicf-induct keys create`: run the service, make its API keys.

The CLI does not import the service (`api` sits above it): `serve` hands uvicorn the app
factory by its import string and passes the options as the service's settings variables.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shlex
import sys
from pathlib import Path

import warehouse
from aicf_induct.cli.table import print_table
from aicf_induct.errors import ConfigError
from warehouse.keys import SCOPES, create_key, default_path, id_of, list_keys, revoke_key

APP = "api.app:create_app"
ENV = "AICF_SERVICE_"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--warehouse", metavar="DIR", type=Path, default=None,
                        help=f"warehouse directory (default: ${warehouse.catalog.ENV_VAR}, "
                             f"else ./{warehouse.catalog.DEFAULT_DIR})")
    common.add_argument("--keys-file", metavar="FILE", type=Path, default=None,
                        help="API key file, in a directory that exists (default: "
                             "<warehouse>/_service_keys.json)")

    p = sub.add_parser("serve", parents=[common], help="run the HTTP service",
                       description="Serve runs, pattern reports, read-only SQL and proposals "
                                   "over the warehouse (see docs/service.md). Binds to "
                                   "127.0.0.1 unless --host says otherwise.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--read-requires-key", action="store_true",
                   help="read routes need a read or write key too (default: open)")
    p.add_argument("--pack", metavar="PACK", type=Path, default=None,
                   help="knowledge pack the proposals rank from (default: $AICF_PACK, else the "
                        "one installed with the package)")
    p.set_defaults(func=cmd_serve)

    k = sub.add_parser("keys", help="manage the service's API keys")
    ksub = k.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    p = ksub.add_parser("create", parents=[common], help="create a key and print it once",
                        description="Create an API key, print it (the only time it is shown) "
                                    "and store its SHA-256 in the key file.")
    p.add_argument("--scope", choices=SCOPES, required=True,
                   help="write: every route; read: read routes only")
    p.set_defaults(func=cmd_keys_create)
    p = ksub.add_parser("list", parents=[common], help="list the keys (id, scope, created)",
                        description="List the stored keys by id, scope and creation time; "
                                    "the keys themselves were shown once, when created.")
    p.add_argument("--json", action="store_true", help="print them as a JSON list")
    p.set_defaults(func=cmd_keys_list)
    p = ksub.add_parser("revoke", parents=[common], help="revoke a key by its id",
                        description="Remove the key with this id (keys list shows the ids); "
                                    "a running server refuses it from its next request on.")
    p.add_argument("key_id", metavar="ID", help="the key's id, as keys list shows it")
    p.set_defaults(func=cmd_keys_revoke)


def _root(args: argparse.Namespace) -> Path:
    root = warehouse.default_root(args.warehouse)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--warehouse: '{root}' is not a directory")
    return root


def _keys_path(args: argparse.Namespace) -> Path:
    return Path(args.keys_file) if args.keys_file else default_path(_root(args))


def _keys_dir(args: argparse.Namespace) -> None:
    """A --keys-file in a directory that does not exist is a typo: refused, not made (a key
    stored there would be read by no server)."""
    if args.keys_file is not None and not Path(args.keys_file).parent.is_dir():
        raise ConfigError(f"--keys-file: no directory {Path(args.keys_file).parent} to hold "
                          f"{args.keys_file}")


def cmd_keys_create(args: argparse.Namespace) -> int:
    _keys_dir(args)
    made = False
    if args.keys_file is None:  # the key file goes in the warehouse: not in a typo's
        root = _root(args)
        # a warehouse not made yet is one `serve` serves: its keys come before its first run
        # (docs/service.md); made here, and said, as the key file's directory
        made = not warehouse.check_served(root, "--warehouse")
    path = _keys_path(args)
    key = create_key(path, args.scope)
    if made:
        print(f"note: no warehouse at {path.parent} yet: made it, empty, to hold the key "
              f"file (`aicf-induct serve --warehouse {shlex.quote(str(path.parent))}` serves "
              "it; the first run logged through it fills it)", file=sys.stderr)
    print(key)
    print(f"{args.scope} key {id_of(path, key)} stored (hashed) in {path}; it is not shown "
          "again (keys revoke ID removes it)", file=sys.stderr)
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    keys = list_keys(_keys_path(args))
    if args.json:
        print(json.dumps(keys, indent=1))
    elif keys:
        print_table([[k["id"], k["scope"], k["created_at"]] for k in keys],
                    ["id", "scope", "created"])
    else:
        print(f"no keys in {_keys_path(args)}")
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    gone = revoke_key(_keys_path(args), args.key_id)
    print(f"revoked {gone['scope']} key {gone['id']} (created {gone['created_at']})")
    return 0


def _env(args: argparse.Namespace, root: Path) -> dict[str, str]:
    if not 1 <= args.port <= 65535:
        raise ConfigError(f"--port: {args.port} is not a port (1-65535)")
    if args.workers < 1:
        raise ConfigError(f"--workers: {args.workers} must be at least 1")
    env = {f"{ENV}WAREHOUSE": str(root.resolve()), f"{ENV}HOST": args.host,
           f"{ENV}PORT": str(args.port),
           f"{ENV}READ_REQUIRES_KEY": "true" if args.read_requires_key else "false",
           f"{ENV}NOTE_EMPTY_WAREHOUSE": "false"}  # serve says it, once: not every worker
    if args.keys_file is not None:
        env[f"{ENV}KEYS_FILE"] = str(Path(args.keys_file).resolve())
    from aicf_induct.induction.pack import env_pack

    if args.pack is not None:
        if not Path(args.pack).is_file():
            raise ConfigError(f"--pack: no knowledge pack at {args.pack}")
        env[f"{ENV}PACK"] = str(Path(args.pack).resolve())
    elif not os.environ.get(f"{ENV}PACK") and (pack := env_pack()) is not None:
        env[f"{ENV}PACK"] = str(pack.resolve())  # as the other commands read it
    return env


def _public(host: str) -> bool:
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host != "localhost"


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    root = _root(args)
    env = _env(args, root)
    # a typo must not serve an empty warehouse and start one there: refused here in one
    # line (the factory checks again in every worker); a warehouse not made yet is noted
    # here, once, before the workers start
    served = warehouse.check_served(root, "--warehouse")
    # a key file that cannot be read would fail every request that presents a key: refused
    # now, as `keys list` words it
    _keys_dir(args)
    list_keys(_keys_path(args))
    if not served:
        print(warehouse.empty_note(root.resolve()), file=sys.stderr)
    else:
        from warehouse.compact import compaction_note

        many = compaction_note(root)  # the first read lists every part: say why it waits
        if many:
            print(many, file=sys.stderr)
    os.environ.update(env)  # the factory (and every worker) reads these
    if _public(args.host) and not args.read_requires_key:
        print(f"warning: {args.host} is reachable from other machines and read routes are "
              "open (--read-requires-key closes them)", file=sys.stderr)
    uvicorn.run(APP, factory=True, host=args.host, port=args.port, workers=args.workers,
                log_level="info")
    return 0
