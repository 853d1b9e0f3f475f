"""Hidden checks of a07_attention: the pieces of a transformer and their backward passes.

The exercises are functions of `solutions/ops/attention.py` (causal_mask, masked_softmax_array,
MaskedSoftmax.backward, scaled_dot_product_attention, attention_backward, split_heads,
merge_heads, embedding_backward_array) and `solutions/nn/functional.py` (layer_norm). Each is
judged on its own by the trusted judge: the student's answer runs in the sandbox's engine, where
every other exercise is the reference, on inputs built there (Tensors of that engine); the same
case runs through the reference here and only plain data crosses. Cases cover masks broadcast over
batch and heads, additive float masks, fully masked rows, a masked score that is its row's maximum,
more keys than queries, keys and values shared by every head (broadcast batch axes), masks that do
not broadcast, dropout drawn from a given generator, every combination of wanted gradients,
repeated tokens, float32 and gradients of gradients; the array kernels must leave their inputs as
they were. Messages name the kind of mistake (the classic ones by name: a scale of 1/D, a mask
added or multiplied after the softmax, the row maximum taken before the mask, the wrong axis, heads
merged out of order, a causal mask off by one, an embedding gradient assigned instead of
accumulated, layer norm over the batch), never the hidden inputs or values.
"""
# The submodules in the notebook's order: @graded declares each exercise as its module is imported.
from . import masks, attention, heads, embedding, layer_norm  # noqa: F401, I001
