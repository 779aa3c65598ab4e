// Force-included after SMPI's own helpers in the simulated build (CMakeLists.txt, SPB_SIM): smpicxx turns every
// `exit(x)` into smpi_exit, which also rewrites member functions of that name (CLI11's App::exit). spbench ends its
// ranks by returning from main, so the plain name is left alone. (malloc and free are kept plain by
// SMPI_NO_OVERRIDE_MALLOC: the simulated device asks for shared memory itself, sim/sim_smpi.cpp.)
#undef exit
