"""`fivespot controller capacity|machine ...`: the command-line entry of the controllers.

`register(subparsers)` adds the `controller` command to any argparse parser (the `fivespot` CLI
wires it in with one line). The flags, inputs and process are every controller's
(`runtime.process`): this only names which reconciler runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from api.bundle import Bundle
from runtime.process import EXIT_BAD_INPUT, EXIT_OK, add_runtime_flags, runtime_inputs, serve

__all__ = ["EXIT_BAD_INPUT", "EXIT_OK", "add_runtime_flags", "register", "runtime_inputs", "serve"]


def add_capacity(subparsers: Any) -> argparse.ArgumentParser:
    """The `capacity` subcommand (under `controller`, or top level for `python -m controllers`)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "capacity", help="run the ScheduledCapacity controller")
    add_runtime_flags(parser)
    parser.set_defaults(handler=run_capacity)
    return parser


def add_machine(subparsers: Any) -> argparse.ArgumentParser:
    """The `machine` subcommand: ScheduledMachine -> CAPI Machines."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "machine", help="run the ScheduledMachine controller (CAPI Machines by schedule)")
    add_runtime_flags(parser)
    parser.set_defaults(handler=run_machine)
    return parser


def add_audit(subparsers: Any) -> argparse.ArgumentParser:
    """The `audit` subcommand: PolicyReports of what the policies in force now deny."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "audit", help="run the audit controller (PolicyReports of objects out of policy)")
    add_runtime_flags(parser)
    parser.set_defaults(handler=run_audit)
    return parser


def register(subparsers: Any) -> None:
    """Add `controller capacity|machine|audit` to a parser's subcommands."""
    controller = subparsers.add_parser("controller", help="run a fivespot controller")
    sub = controller.add_subparsers(dest="controller", metavar="CONTROLLER", required=True)
    add_capacity(sub)
    add_machine(sub)
    add_audit(sub)


def run_capacity(args: argparse.Namespace) -> int:
    from controllers.capacity.controller import capacity_manager

    return serve(args, "capacity controller", capacity_manager)


def run_machine(args: argparse.Namespace) -> int:
    from controllers.machine.controller import machine_manager

    def needs_machines(bundle: Bundle) -> None:
        if bundle.machines is None:
            raise ValueError(f"{args.bundle}: the bundle declares no MachineProvisioning, so there "
                             "are no ScheduledMachines to reconcile; add one to the config repo "
                             "and compile again")

    return serve(args, "machine controller", machine_manager, check=needs_machines)




def run_audit(args: argparse.Namespace) -> int:
    from controllers.audit.controller import audit_manager

    return serve(args, "audit controller", audit_manager)
