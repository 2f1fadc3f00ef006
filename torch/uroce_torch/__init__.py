"""torch.distributed backend "uroce": import this module, then
init_process_group(backend="uroce"). CPU tensors; all_reduce,
reduce_scatter, all_gather, broadcast, reduce, all_to_all and barrier,
async work handles included. Ranks of one host use shared memory, the
others RoCEv2 (their address in UROCE_ADDR). The rendezvous goes through
torch.distributed's own store."""
import torch.distributed as dist

from ._uroce_pg import ProcessGroupUroce


def _create(store, rank, size, timeout):
    return ProcessGroupUroce(store, rank, size,
                             int(timeout.total_seconds() * 1000))


if not hasattr(dist.Backend, "UROCE"):
    dist.Backend.register_backend("uroce", _create)
