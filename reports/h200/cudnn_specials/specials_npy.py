# Inputs for the cuDNN specials check: float32 .npy rows holding Inf/NaN.
import math, random, struct
def npy(path, rows):
    r, c = len(rows), len(rows[0])
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (r, c)
    hdr += ' ' * ((64 - (10 + len(hdr) + 1) % 64) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode())
        for row in rows:
            f.write(struct.pack('<%df' % c, *row))
inf, nan = math.inf, math.nan
random.seed(7)
def row(n): return [random.gauss(0, 1) for _ in range(n)]
d = '.devrun/npy/'
npy(d + 'one_inf.npy', [[inf]])
npy(d + 'one_ninf.npy', [[-inf]])
npy(d + 'one_nan.npy', [[nan]])
npy(d + 'one_fin.npy', [[1.5]])
r = row(8); r[3] = inf; npy(d + 'r8_inf.npy', [r, row(8)])
r = row(8); r[3] = nan; npy(d + 'r8_nan.npy', [r, row(8)])
r = row(8); r[3] = inf; r[5] = -inf; npy(d + 'r8_pm.npy', [r, row(8)])
npy(d + 'r8_allinf.npy', [[inf] * 8, row(8)])
r = row(5246); r[100] = inf; npy(d + 'r5246_inf.npy', [r, row(5246)])
r = row(1024); r[10] = nan; npy(d + 'r1024_nan.npy', [r, row(1024)])
# The sweep: row i holds one Inf (or two) at its own position, the rest finite.
def sweep(name, n, positions, val=inf, second=None):
    rows = []
    for p in positions:
        r = row(n); r[p] = val
        if second is not None:
            r[second(p)] = val
        rows.append(r)
    npy(d + name, rows)
for n in (2, 3, 5, 8, 16, 64):
    sweep('one_inf_n%d.npy' % n, n, range(n))
sweep('one_ninf_n64.npy', 64, range(64), -inf)
sweep('one_inf_n1024.npy', 1024, [i * 16 + i % 16 for i in range(64)])
sweep('one_inf_n5246.npy', 5246, [i * 163 for i in range(32)])
sweep('two_inf_n64.npy', 64, range(64), inf, lambda p: (p + 17) % 64)
