"""One figure of drills/bench's report next to its target, as report.py and neighbour_report.py
print it."""


def line(name, value, unit, target, ok, bound=""):
    """Prints `name`'s `value` in `unit` beside `target`: PASS, MISS, or n/a where `ok` is None;
    a MISS names what bounds it (`bound`) on a line of its own."""
    state = "n/a " if ok is None else ("PASS" if ok else "MISS")
    shown = f"{value:>10.2f}" if ok is not None else f"{'—':>10}"
    print(f"{name:<50} {shown} {unit:<8} target {target:<24} {state}")
    if ok is False and bound:
        print(f"    bounded by: {bound}")
