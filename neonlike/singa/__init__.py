"""Apache SINGA's autograd front end (seed 004) on the neonlike engine.

    from neonlike.singa import tensor, autograd, opt, device

A SINGA script ports by renaming `singa` to `neonlike.singa`. Modules: tensor (Tensor,
from_numpy, to_numpy), autograd (Operation, backward, the operators and layers), opt (SGD, Adam),
device (get_default_device, create_cuda_gpu), singa_wrap (CTensor). Nothing is imported until a
submodule is: `import neonlike` does not load this package.
"""
