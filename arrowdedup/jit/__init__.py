"""What every jitted module stands on: Numba set up once (:mod:`.runtime`), the interpreted
twins that spare a small run the compile (:mod:`.interpreted`), and the memory intrinsics Numba's
language lacks (:mod:`.intrinsics_jit`, with its pure-Python stand-in :mod:`.byte_loads`)."""
