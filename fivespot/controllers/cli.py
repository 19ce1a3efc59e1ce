"""`fivespot controller capacity|machine|audit ...`: the command-line entry of the controllers.

`register(subparsers)` adds the `controller` command to any argparse parser (the `fivespot` CLI
wires it in with one line). The flags, inputs and process are every controller's
(`fivespot.runtime.controllerprocess`): this only names which reconciler runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Final

from fivespot.api.bundle import Bundle
from fivespot.runtime.controllerprocess import EXIT_BAD_INPUT, EXIT_OK, add_runtime_flags, runtime_inputs, serve

__all__ = ["CONTROLLERS", "EXIT_BAD_INPUT", "EXIT_OK", "add_controllers", "add_runtime_flags", "register",
           "runtime_inputs", "serve"]


CAPACITY_WORKERS: Final = 16
"""The capacity controller's reconciles at once (`--workers`). A boundary is a burst of target
writes, each a round trip to the API server and through the target-guard webhook; with 4 the
controller waited on 4 of them while the cores had room for more. Beside the peers, on one
machine in turn: the last of 1,000 writes p50 / p99 2.81 / 3.13 s with 16, 3.59 / 4.45 s with 4
(decision 0041). kube-green runs 20."""


def register(subparsers: Any) -> None:
    """Add `controller capacity|machine|audit` to a parser's subcommands."""
    controller = subparsers.add_parser("controller", help="run a fivespot controller")
    sub = controller.add_subparsers(dest="controller", metavar="CONTROLLER", required=True)
    add_controllers(sub)


def run_capacity(args: argparse.Namespace) -> int:
    from fivespot.controllers.capacity.controller import capacity_manager

    return serve(args, "capacity controller", capacity_manager)


def run_machine(args: argparse.Namespace) -> int:
    from fivespot.controllers.machine.controller import machine_manager

    def needs_machines(bundle: Bundle) -> None:
        if bundle.machines is None:
            raise ValueError(f"{args.bundle}: the bundle declares no MachineProvisioning, so there "
                             "are no ScheduledMachines to reconcile; add one to the config repo "
                             "and compile again")

    return serve(args, "machine controller", machine_manager, check=needs_machines)




def run_audit(args: argparse.Namespace) -> int:
    from fivespot.controllers.policyreports.controller import audit_manager

    return serve(args, "audit controller", audit_manager)


CONTROLLERS: tuple[tuple[str, str, Callable[[argparse.Namespace], int], dict[str, Any]], ...] = (
    ("capacity", "run the ScheduledCapacity controller", run_capacity,
     {"workers": CAPACITY_WORKERS}),
    ("machine", "run the ScheduledMachine controller (CAPI Machines by schedule)", run_machine, {}),
    ("audit", "run the audit controller (PolicyReports of objects out of policy)", run_audit, {}),
)
"""Every controller's subcommand, its help, its handler and the defaults it changes: the one
list of controllers."""


def add_controllers(subparsers: Any) -> None:
    """One subcommand per controller (under `controller`, or top level for `python -m fivespot.controllers`)."""
    for name, help_text, handler, defaults in CONTROLLERS:
        parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help_text)
        add_runtime_flags(parser)
        parser.set_defaults(handler=handler, **defaults)
