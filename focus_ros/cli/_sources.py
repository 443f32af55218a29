"""Options shared by the evaluating subcommands: the sequence (a path or a simulator preset),
or several (the evaluation grids), the loss names, and the angular-velocity ground truth."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from focus_ros.cli import UserError


def add_source_arguments(parser: argparse.ArgumentParser, several: bool = False) -> None:
    """The sequence: a path, or --simulate PRESET with --sensor / --duration / --sim-end / --seed.
    several: any number of paths, or comma-separated presets and seeds (every preset with every
    seed), expanded by :func:`source_choices`."""
    if several:
        parser.add_argument("sequence", nargs="*", help="ECD folders (events.txt, calib.txt, imu.txt, "
                                                        "groundtruth.txt) or bags, one or more; omit with --simulate")
    else:
        parser.add_argument("sequence", nargs="?", help="ECD folder (events.txt, calib.txt, imu.txt, "
                                                        "groundtruth.txt) or a bag; omit with --simulate")
    parser.add_argument("--calib", help="calibration override: calib.txt or camera YAML")
    parser.add_argument("--simulate", metavar="PRESET[,PRESET...]" if several else "PRESET",
                        help="simulate a preset instead (rotation, rotation_short, ...), seeded"
                             + ("; several: comma-separated" if several else ""))
    parser.add_argument("--duration", type=float, metavar="S", help="trajectory duration of the preset (s)")
    parser.add_argument("--sim-end", type=float, metavar="S",
                        help="simulate only the first S seconds of the trajectory")
    if several:
        parser.add_argument("--seed", type=_seeds, default=[0], metavar="N[,N...]",
                            help="simulation seed, or comma-separated seeds (default 0)")
    else:
        parser.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    parser.add_argument("--sensor", metavar="NAME", help="the camera --simulate simulates: " + ", ".join(
        _sensor_names()) + " (size, typical intrinsics and distortion; default davis240c)")


def _sensor_names() -> list[str]:
    from focus_ros.camera import SENSORS
    return list(SENSORS)


def check_sensor(name: str | None, option: str = "--sensor") -> str:
    """The sensor name of a --sensor option (default davis240c); UserError naming the choices."""
    if name is None:
        return "davis240c"
    if name not in _sensor_names():
        raise UserError(f"unknown {option} '{name}': choose one of {', '.join(_sensor_names())}")
    return name


def load_source(args):
    """(Recording, simulated: bool, description) from the source options."""
    from focus_ros.evaluation.sequence import load_sequence, simulate_sequence

    if args.simulate and args.sequence:
        raise UserError("give either a sequence path or --simulate, not both")
    if args.sensor is not None and not args.simulate:
        check_sensor(args.sensor)
        raise UserError("--sensor chooses the camera of --simulate; a sequence's own calibration gives its camera "
                        "(override it with --calib)")
    if args.simulate:
        from focus_ros.sources.simulator import PRESETS
        if args.simulate not in PRESETS:
            raise UserError(f"unknown --simulate preset '{args.simulate}': choose one of {', '.join(PRESETS)}")
        for flag, value in (("--duration", args.duration), ("--sim-end", args.sim_end)):
            if value is not None and not value > 0:
                raise UserError(f"{flag} must be positive (s), got {value}")
        sensor = check_sensor(args.sensor)
        recording = simulate_sequence(args.simulate, args.duration, args.seed, args.sim_end, camera=sensor)
        description = (f"simulator preset {args.simulate}, {sensor}, seed {args.seed}"
                       + (f", duration {args.duration:g} s" if args.duration else "")
                       + (f", first {args.sim_end:g} s" if args.sim_end else ""))
        return recording, True, description
    if not args.sequence:
        raise UserError("give a sequence path or --simulate PRESET")
    recording = load_sequence(args.sequence, args.calib)
    simulation = recording.simulation
    if simulation is None:
        return recording, False, str(args.sequence)
    return recording, True, (f"{args.sequence} (simulated: preset {simulation.get('preset', '?')}, "
                             f"{simulation.get('camera', '?')}, seed {simulation.get('seed', '?')})")


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(word) for word in text.split(",") if word.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got '{text}'") from None
    if not seeds:
        raise argparse.ArgumentTypeError("expected at least one seed")
    return seeds


@dataclass(frozen=True)
class SourceChoice:
    """One sequence of a grid: ``name`` (its output subfolder when there are several, and its
    jobs' key prefix) and ``args``: the options of that one sequence, for :func:`load_source`."""

    name: str
    args: argparse.Namespace


def source_choices(args) -> list[SourceChoice]:
    """The sequences of options added with ``several=True``, in the order given: each path
    (named by its file or folder name, made unique), or every --simulate preset with every
    --seed (named PRESET_seedN). UserError when none or both kinds are given."""
    presets = [word.strip() for word in (args.simulate or "").split(",") if word.strip()]
    if presets and args.sequence:
        raise UserError("give either sequence paths or --simulate, not both")
    if presets:
        pairs = [(preset, seed) for preset in presets for seed in args.seed]
        return [SourceChoice(f"{preset}_seed{seed}", argparse.Namespace(**{**vars(args), "sequence": None,
                                                                            "simulate": preset, "seed": seed}))
                for preset, seed in dict.fromkeys(pairs)]
    if len(args.seed) > 1:
        raise UserError("several --seed values go with --simulate")
    if not args.sequence:
        raise UserError("give a sequence path or --simulate PRESET")
    choices, names = [], set()
    for path in args.sequence:
        name = Path(path).name or "sequence"
        while name in names:
            name = f"{name}_{len(names)}"
        names.add(name)
        choices.append(SourceChoice(name, argparse.Namespace(**{**vars(args), "sequence": path, "simulate": None,
                                                                 "seed": args.seed[0]})))
    return choices


def loss_names(text: str) -> list[str]:
    """The losses of a --losses option: 'all' or comma-separated registry names (UserError
    naming an unknown one)."""
    from focus_ros.losses import LOSSES

    if text == "all":
        return list(LOSSES)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in LOSSES]
    if unknown or not names:
        raise UserError(f"unknown loss '{unknown[0] if unknown else text}' in --losses: choose 'all' or "
                        f"names from {', '.join(LOSSES)}")
    return names


def angular_velocity_ground_truth(args, recording, simulated: bool):
    """Ground-truth angular velocity per --ground-truth (auto: the IMU, else mocap, else none) and
    --imu-delay (ms; default 2.4 for recorded data; a simulated sequence's IMU is exact: no delay,
    and a line on stderr says so), or None."""
    import sys

    from focus_ros.evaluation.ground_truth import DEFAULT_IMU_DELAY_NS, from_imu, from_poses, from_simulated_imu

    choice = args.ground_truth
    if choice == "auto":
        choice = "imu" if recording.imu is not None and len(recording.imu) >= 2 else (
            "mocap" if recording.poses is not None and len(recording.poses) >= 3 else "none")
    if choice == "none":
        return None
    if choice == "imu":
        if recording.imu is None or len(recording.imu) < 2:
            raise UserError("--ground-truth imu: the sequence has no IMU samples")
        if args.imu_delay is not None:
            return from_imu(recording.imu, int(round(args.imu_delay * 1e6)))
        if not simulated:
            return from_imu(recording.imu, DEFAULT_IMU_DELAY_NS)
        ground_truth = from_simulated_imu(recording.imu)
        print(f"ground truth: {ground_truth.source}, since the sequence is simulated (--imu-delay MS overrides)",
              file=sys.stderr)
        return ground_truth
    if recording.poses is None or len(recording.poses) < 3:
        raise UserError("--ground-truth mocap: the sequence has no camera poses")
    return from_poses(recording.poses)
