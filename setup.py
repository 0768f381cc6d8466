"""neonlike: neon's op-tree programming model, fused and fast on today's Python stack."""
from setuptools import Extension, find_packages, setup

MKL_PLATFORMS = "(platform_machine == 'x86_64' or platform_machine == 'AMD64') and sys_platform != 'darwin'"
OPENBLAS_PLATFORMS = ("platform_machine == 'x86_64' or platform_machine == 'AMD64' or "
                      "platform_machine == 'aarch64' or platform_machine == 'arm64'")

setup(
    name="neonlike",
    version="0.1.0",
    description="Nervana neon's backend programming model (lazy op-trees, fused kernels, autodiff), "
                "alive on current Python, numpy, Numba and CUDA",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    # every package under neonlike/ (the front ends' too), and the kernel templates
    packages=find_packages(include=["neonlike", "neonlike.*"]) + ["neonlike.kernels"],
    package_dir={"neonlike.kernels": "kernels"},
    package_data={"neonlike.kernels": ["*.py.tmpl", "*.cu.tmpl", "*.cuh", "README.md"],
                  "neonlike.data": ["text/*.txt"]},
    # optree's node maker in C (neonlike/_hotpath.c); optional: without a C compiler the build goes
    # on and optree uses its Python maker (the same nodes, ~5x slower to build)
    ext_modules=[Extension("neonlike._hotpath", ["neonlike/_hotpath.c"], optional=True)],
    install_requires=[
        "numpy>=1.26",
        "numba>=0.60",
        f"mkl; {MKL_PLATFORMS}",
        f"mkl-service; {MKL_PLATFORMS}",
        # GEMM's OpenBLAS path: a private single-threaded OpenBLAS run on numba's pool
        # (backends/cpu/openblas.py); AVX-512 kernels where MKL takes AVX2 (AMD)
        f"scipy-openblas32; {OPENBLAS_PLATFORMS}",
        "scikit-learn",   # the digits dataset, the examples' default data
        "tqdm>=4.60",     # the training progress bar (callbacks.ProgressBarCallback)
    ],
    extras_require={
        # the tests run everything: the distributed tests under mpiexec, the HDF5 iterator's
        "test": ["pytest>=7", "hypothesis>=6", "mpi4py", "mpich", "h5py"],
        "gpu": ["pycuda>=2024.1"],
        "bench": ["numexpr"],
        "hdf5": ["h5py"],             # HDF5Iterator (neon's HDF5 datasets)
        "mpi": ["mpi4py", "mpich"],   # data-parallel training (neonlike.distributed); mpich brings mpiexec
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
