#!/usr/bin/env python3
"""clock_summary.py CLOCKS.csv — what the GPU's clocks did during a run.

CLOCKS.csv is what gpu_env.sh's clock_log_start samples with nvidia-smi
(every 100 ms: timestamp, SM clock MHz, memory clock MHz, power W,
temperature C, active clock event reasons as a hex mask; the memory clock
is kept in the log for reading, not summarised).  Prints the SM
clock's spread over the busy samples (not idle), the power drawn, and how
often the driver held the clock down, by reason (NVML's clock event
reasons): a timing taken while the clock sat lower is slower for it, and
cases timed one after the other need not have seen the same clock.

Exit status: 0, or 2 on usage errors or a file that cannot be read as text
(named on stderr with why).
"""
import argparse
import statistics
import sys

REASONS = {  # NVML clock event reason bits
    0x4: "sw power cap",
    0x8: "hw slowdown",
    0x20: "sw thermal",
    0x40: "hw thermal",
    0x80: "hw power brake",
}
IDLE = 0x1


def read_samples(path):
    """(SM clock, power, temperature, reasons mask) of each sample line of a clock log."""
    rows = []
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.split(",")]
            if len(cells) < 6 or line.startswith("#"):
                continue
            try:
                sm, power, temp = float(cells[1]), float(cells[3]), float(cells[4])
                mask = int(cells[5], 16)
            except ValueError:
                continue  # a header or a field nvidia-smi could not read
            rows.append((sm, power, temp, mask))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("clocks", metavar="CLOCKS.csv", help="the log gpu_env.sh's clock_log_start wrote")
    args = ap.parse_args()
    try:
        rows = read_samples(args.clocks)
    except OSError as e:
        print("clock_summary: %s: %s" % (args.clocks, e.strerror or e), file=sys.stderr)
        return 2
    except UnicodeDecodeError as e:
        print("clock_summary: %s: not text (%s)" % (args.clocks, e), file=sys.stderr)
        return 2
    busy = [r for r in rows if not r[3] & IDLE]
    if not busy:
        print(f"{len(rows)} samples, none busy")
        return 0
    sms = sorted(r[0] for r in busy)
    q = lambda v, p: v[min(len(v) - 1, int(p * len(v)))]
    print(f"{len(busy)} busy samples of {len(rows)} (100 ms apart)")
    print(f"SM clock MHz: min {sms[0]:.0f}, p10 {q(sms, 0.1):.0f}, median {statistics.median(sms):.0f}, "
          f"max {sms[-1]:.0f}")
    power = sorted(r[1] for r in busy)
    print(f"power W: median {statistics.median(power):.0f}, max {power[-1]:.0f}; "
          f"temperature C: max {max(r[2] for r in busy):.0f}")
    for bit, name in REASONS.items():
        n = sum(1 for r in busy if r[3] & bit)
        if n:
            print(f"clock held down by {name}: {n} samples ({100.0 * n / len(busy):.0f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
