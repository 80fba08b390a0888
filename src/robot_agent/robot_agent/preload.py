"""What the fleet's process template (``prefork``) imports once for every node it forks.

Importing this module loads rclpy, torch, transformers and the node modules, and the
code their *configure* imports lazily: the shipped experts' modules and the transformers
model and tokenizer classes they and the task manager's embedding model resolve. Resolving
``transformers.ViTModel`` alone imports ~1,400 modules (transformers' modeling
utilities pull in torch.distributed.tensor, sympy, scipy): left to each child, that was
~170 MB of private memory per node process (measured with a forked probe: 31 MB USS
after the node's constructor, 202 MB after configure). Models themselves are still
loaded by each node: running torch in the template before forking would leave the
children an initialised thread pool. Then it freezes the collector's view of everything
loaded so far (``gc.freeze``): the garbage collector then never walks, and so never
writes to, those objects, and the forked nodes keep sharing their pages. (A forked gate
thus has the planner's modules mapped, shared and idle: it runs none of their code.)
"""

import gc

import rclpy  # noqa: F401
import torch  # noqa: F401
import transformers  # noqa: F401

# the lazily resolved classes: the world expert's ViT, and the shipped embedding model
# (all-MiniLM-L6-v2, a BERT) with its fast tokenizer
from transformers import AutoModel, AutoTokenizer, BertModel, BertTokenizerFast  # noqa: F401

import action_expert_node.node  # noqa: F401
import harness_node.node  # noqa: F401
import harness_node.task_managers  # noqa: F401
import harness_node.task_node  # noqa: F401
import world_expert_node.node  # noqa: F401
from wam_core.models import action_expert, world_expert  # noqa: F401
from wam_core.planning import llm  # noqa: F401

gc.freeze()
