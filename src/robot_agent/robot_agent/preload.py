"""What the fleet's process template (``prefork``) imports once for every node it forks.

Importing this module loads rclpy, torch, transformers and the node modules (the
harness's embedding model itself is loaded by each harness: running torch in the
template before forking would leave the children an initialised thread pool), then
freezes the collector's view of everything loaded so far (``gc.freeze``): the garbage
collector then never walks, and so never writes to, those objects, and the forked nodes
keep sharing their pages.
"""

import gc

import rclpy  # noqa: F401
import torch  # noqa: F401
import transformers  # noqa: F401

import action_expert_node.node  # noqa: F401
import harness_node.node  # noqa: F401
import world_expert_node.node  # noqa: F401

gc.freeze()
