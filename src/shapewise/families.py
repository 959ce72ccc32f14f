"""The model types shapewise reads by their own rules: Hugging Face's defaults for the fields a
config.json may omit, and the architectures it refuses because they are not attention transformers.

Each default below is the value of the model type's configuration class in Hugging Face transformers
(e.g. LlamaConfig(tie_word_embeddings=False), StableLmConfig(tie_word_embeddings=False),
Gemma2Config(hidden_activation="gelu_pytorch_tanh")) or of the model's own configuration code
(BTLM, MPT), so that a file that leaves a field out reads as the library would build the model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Family:
    gated: bool  # MLP with a gate (GLU); the activation then picks swiglu or geglu
    norm: str
    bias: bool
    tied: bool  # the model type's default for tie_word_embeddings
    parallel: bool  # attention and MLP read the same normalized input
    act: str = "silu"  # default activation when the file names none
    positions: str = ""  # learned position table: "gpt2", "opt", "gpt_neo"; "alibi"; "" for rotary
    rotary: str = "full"  # "full", or the key holding the rotated fraction or width ("partial_rotary_factor", ...)
    norms_per_layer: int = 2
    qk_norm: bool = False
    qk_norm_weights: str = "head"  # what the QK-norm's weights span (shapes.QK_NORM_WEIGHTS)
    window: str = ""  # "all": every layer slides (Mistral); "alternate": every other one (Gemma-2); "pattern": Gemma-3
    softcap: bool = False  # reads final_logit_softcapping
    fused_mlp: bool = False  # intermediate_size holds both halves of the gated MLP (Qwen 1, Molmo)
    ffn_key: str = ""  # the key of the dense MLP's width, where not intermediate_size (Llama 4)
    expert_ffn_key: str = ""  # the key of the experts' width, where not moe_intermediate_size (Llama 4)
    shared_experts: int = 0  # shared experts every MoE layer runs, where the file does not count them (Llama 4)
    # The key whose true puts biases on the query, key and value projections alone, the others having none
    # (GLM-4.5's and MiMo's attention_bias, StableLM's use_qkv_bias, ChatGLM's add_qkv_bias), or "always" where
    # the model's code puts them there whatever the file says (Qwen2's and Qwen's attention)
    qkv_bias: str = ""
    embed_norm: bool = False  # a norm over the embeddings before the first layer (BLOOM)
    # The key whose true puts a bias on the output head (PhiMoE's lm_head_bias), or "always" where the model's code
    # puts one there whatever the file says (PhiForCausalLM's and GPTJForCausalLM's lm_head: nn.Linear's default bias)
    lm_head_bias: str = ""
    # Which linears the biases go on (shapes.BIAS_SCOPES): GPT-J's attention has none (GPTJAttention's q, k, v and
    # out_proj: bias=False), PhiMoE's experts have none (PhimoeBlockSparseTop2MLP's w1, w2, w3: bias=False), nor
    # have Gemma's, Qwen3's and Cohere's MLPs (their attention_bias is q, k, v and o's alone)
    bias_scope: str = "all"
    # Biases on the output projections, attention's and the MLP's, whatever the rest have: GPT-Neo's out_proj (its
    # q_proj, k_proj and v_proj: bias=False) beside its biased MLP; TeleChat's dense and down_proj alone
    out_bias: bool = False
    # The type's code sets its biases whatever bias keys the file writes (PhiAttention's q, k, v and dense:
    # bias=True; PhiConfig reads no attention_bias, which phi-1's file writes false): those keys are not read
    bias_fixed: bool = False
    shared_expert_gate: bool = False  # a sigmoid gate, hidden → 1, on the shared experts' output (Qwen2-MoE)
    # Experts intermediate_size wide, no dense MLP beside them and no key of their own for the experts' width
    # (GptOssConfig): moe_intermediate_size is not theirs. (Mixtral's and PhiMoE's are alike, but a fresh
    # config of experts apart from the MLP width is written as a Mixtral one.)
    experts_at_ffn: bool = False
    mla_v_from_hidden: bool = False  # latent attention's value heads are hidden / heads wide (MiniCPM3)
    # Keys whose value may be a list of one value per layer: read when every layer has the same (Hunyuan).
    per_layer: tuple = ()
    top_k_key: str = ""  # the key of the experts per token, where not one of hf._TOP_K (Hunyuan: moe_topk)
    # (flag key, count key): a shared MLP of intermediate_size × count beside the experts when the flag
    # is true (Hunyuan: use_mixed_mlp_moe, num_shared_expert)
    shared_mlp: tuple = ()
    refused: tuple = ()  # (key, what it does): a config where the key is set is refused, saying what it does
    # NoPE: where the file gives no no_rope_layers list (or an empty one), a layer in every
    # no_rope_layer_interval, this by default, runs without rotary embeddings (SmolLM3Config, Llama4TextConfig)
    nope_interval: int = 0
    nope_global: bool = False  # the global layers among sliding-window ones run without rotary embeddings (EXAONE 4)
    qk_norm_rope_only: bool = False  # QK-norm on the rotary layers alone, none on the NoPE ones (Llama 4)
    # Fields the type's configuration class fills in when the file leaves them out, as (key, value) pairs:
    # Gemma-3's multimodal wrapper writes only the text fields that differ from Gemma3TextConfig's.
    defaults: tuple = ()


_LLAMA = Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False)
_QWEN3 = Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, qk_norm=True,
                bias_scope="attention")
_NEOX = Family(gated=False, norm="layernorm", bias=True, tied=False, parallel=True, act="gelu",
               rotary="rotary_pct")
# Falcon's first design, GPT-J, Phi-1/2 and Cohere feed attention and the MLP from one norm (norms_per_layer
# 1: one norm's op and weights a layer); GPT-NeoX's parallel residual and Falcon's new architecture norm each
# apart (hf reads Falcon's num_ln_in_parallel_attn)
_FALCON = Family(gated=False, norm="layernorm", bias=False, tied=True, parallel=True, act="gelu", norms_per_layer=1)
_GEMMA2 = Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False, act="gelu_pytorch_tanh",
                 norms_per_layer=4, window="alternate", softcap=True, bias_scope="attention")

FAMILIES: dict[str, Family] = {
    # Kimi K2 and GLM-4.7-Flash (glm4_moe_lite): DeepSeek-V3's layout (V3.2 and GLM-5's glm_moe_dsa add a
    # sparse indexer, which hf warns of);
    # XVERSE: Llama's (XVERSE-7B writes no kv heads: as many as heads);
    # Qwen2-VL and Qwen2.5-VL: Qwen2's language model beside vision_config
    **{t: _LLAMA for t in ("llama", "mixtral", "internlm2", "granite", "deepseek_v32", "kimi_k2", "glm4_moe_lite",
                           "glm_moe_dsa", "xverse")},
    # DeepSeek-V2 and V3: a file that leaves out the latent widths means DeepseekV2Config's and DeepseekV3Config's
    # (transformers): a 1536-wide query latent among them, which a model without one must write as null
    # (DeepSeek-V2-Lite's hub file does; mlc-llm's copy of it leaves q_lora_rank out)
    **{t: replace(_LLAMA, defaults=(("kv_lora_rank", 512), ("q_lora_rank", 1536), ("qk_nope_head_dim", 128),
                                    ("qk_rope_head_dim", 64), ("v_head_dim", 128)))
       for t in ("deepseek_v2", "deepseek_v3")},
    # Qwen2 (and its VL models' language model): Llama's layout with biases on q, k and v, which its code puts
    # there whatever the file says; Qwen2-MoE's where its qkv_bias says (Qwen2MoeConfig: true), and its shared
    # expert's output gated (Qwen2MoeSparseMoeBlock's shared_expert_gate)
    **{t: replace(_LLAMA, qkv_bias="always") for t in ("qwen2", "qwen2_vl", "qwen2_5_vl")},
    "qwen2_moe": replace(_LLAMA, qkv_bias="qkv_bias", shared_expert_gate=True, defaults=(("qkv_bias", True),)),
    # DeepSeek-MoE (its own DeepseekConfig): Llama's layout with DeepSeek-V2's MoE keys, multi-head attention;
    # InternLM (1): Llama's, with biases on q, k, v and o where its bias key says (shapewise's bias puts one
    # on every linear: 0.01% of InternLM-7B)
    "deepseek": _LLAMA, "internlm": _LLAMA,
    # InternLM-XComposer (its own InternLMXComposerConfig): InternLM-7B's language model, biases on q, k, v and o
    # where its bias key says; hf says its vision encoder and Q-Former, which its code builds, are not priced
    "internlmxcomposer": _LLAMA,
    # Ling (BailingMoeConfig): Llama's layout with DeepSeek-V2's MoE keys; biases on q, k and v where
    # use_qkv_bias says (its fused query_key_value), on its output projection where use_bias says
    "bailing_moe": replace(_LLAMA, qkv_bias="use_qkv_bias"),
    # Ling 2.0 (its own BailingMoeV2Config and modeling code): Ling's layout with QK-norm where use_qk_norm says, half
    # of each head rotated by default, a dense first layer (first_k_dense_replace) and shared experts of
    # moe_intermediate_size × num_shared_experts, sigmoid-routed
    "bailing_moe_v2": replace(_LLAMA, qkv_bias="use_qkv_bias", rotary="partial_rotary_factor",
                              defaults=(("partial_rotary_factor", 0.5),)),
    # LLaDA2.0 (its own LLaDA2MoeConfig and modeling code; VeOmni's copy names its type llada2_moe_veomni): Ling 2.0's
    # layout, a masked-diffusion model: an RMSNorm(head_dim) on queries and keys whatever use_qk_norm says, half of each
    # head rotated by default, biases on q, k and v where use_qkv_bias says, a dense first layer, shared experts of
    # moe_intermediate_size × num_shared_experts; its attention is not causal (hf says so)
    **{t: replace(_LLAMA, qkv_bias="use_qkv_bias", qk_norm=True, rotary="partial_rotary_factor",
                  defaults=(("partial_rotary_factor", 0.5),)) for t in ("llada2_moe", "llada2_moe_veomni")},
    # InternLM3 (its own InternLM3Config and modeling code): Llama's layout, biases on q, k and v where qkv_bias
    # says, on the other linears where bias says (both false by default), untied
    "internlm3": replace(_LLAMA, qkv_bias="qkv_bias"),
    # Helium (HeliumConfig, HeliumAttention): Llama's layout, biases on q, k and v where attention_bias says (o_proj
    # has none whatever it says), on the MLP where mlp_bias says, untied by default
    "helium": replace(_LLAMA, qkv_bias="attention_bias"),
    # ERNIE 4.5 (Ernie4_5Config, Ernie4_5_MoeConfig): Llama's layout, tied by default; its MoE keys
    # (moe_num_experts, moe_k, moe_layer_start_index, ...) are read by hf
    **{t: Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False)
       for t in ("ernie4_5", "ernie4_5_moe")},
    # Baichuan (its own BaichuanConfig and modeling code): Llama's layer, q, k and v in one W_pack without biases;
    # Baichuan-7B and Baichuan2-7B rotate, Baichuan-13B and Baichuan2-13B add ALiBi biases instead, which no key
    # says: their code tells them apart by the width (BAICHUAN_ROTARY_HIDDEN)
    "baichuan": _LLAMA,
    # MiniCPM (its own MiniCPMConfig, tied by default): Llama's layout; its scale_emb, scale_depth and
    # dim_model_base scale activations, no matrix op
    "minicpm": Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False),
    # Orion (its own modeling code): Llama's layout normalized by LayerNorms with biases
    "orion": Family(gated=True, norm="layernorm", bias=False, tied=False, parallel=False),
    # EXAONE 3.5: Llama's layout, but ExaoneConfig ties the embeddings when the file does not say
    "exaone": Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False),
    # SmolLM3: Llama's layout, tied, no rotary embedding on every 4th layer (SmolLM3Config)
    "smollm3": Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False, nope_interval=4),
    # MiMo: Qwen2's layout, biases on q, k and v where attention_bias says (Qwen2's code, which MiMo's builds on,
    # puts them there; MiMo's files write it true and it is read so where they leave it out)
    "mimo": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, qkv_bias="attention_bias",
                   defaults=(("attention_bias", True),)),
    # Seed-OSS (SeedOssConfig): Llama's layout, biases on q, k and v where attention_bias says (true by default),
    # none on the MLP unless mlp_bias; a bias on o_proj alone (attention_out_bias) is refused by hf
    "seed_oss": replace(_LLAMA, qkv_bias="attention_bias", defaults=(("attention_bias", True),)),
    # Granite MoE and MiniMax-M2: experts of intermediate_size, no dense MLP (GraniteMoeConfig,
    # MiniMaxM2Config); MiniMax-M2 rotates rotary_dim of each head and normalizes queries and keys
    "granitemoe": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, experts_at_ffn=True),
    "minimax_m2": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, rotary="rotary_dim",
                         qk_norm=True, experts_at_ffn=True),
    # GLM-4.5 (Glm4MoeConfig): DeepSeek-V3's MoE layout with grouped attention, half of each head rotated
    # by default, QK-norm where use_qk_norm says; attention_bias puts biases on q, k and v only
    "glm4_moe": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False,
                       rotary="partial_rotary_factor", qkv_bias="attention_bias",
                       defaults=(("partial_rotary_factor", 0.5), ("n_routed_experts", 128), ("num_experts_per_tok", 8),
                                 ("moe_intermediate_size", 1408), ("n_shared_experts", 1),
                                 ("first_k_dense_replace", 1), ("num_nextn_predict_layers", 1))),
    # Qwen (1): a SwiGLU whose two matrices are each half of intermediate_size wide, RMSNorm, biases on its
    # fused query, key and value projection (c_attn) whatever no_bias says of the others
    "qwen": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, rotary="rotary_pct",
                   fused_mlp=True, qkv_bias="always", defaults=(("rotary_pct", 1.0),)),
    # Molmo (OLMo's code): ff_proj is intermediate_size wide, gate and value halves of one SwiGLU
    "molmo": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, fused_mlp=True,
                    qkv_bias="qkv_bias"),
    # Llama 4: experts of intermediate_size beside one shared expert, dense layers of intermediate_size_mlp;
    # text_config of the "llama4" wrapper; no rotary embedding on every 4th layer (Llama4TextConfig); its QK-norm
    # (Llama4TextL2Norm) has no weight
    "llama4_text": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, qk_norm=True,
                          qk_norm_weights="none",
                          ffn_key="intermediate_size_mlp", expert_ffn_key="intermediate_size", shared_experts=1,
                          nope_interval=4, qk_norm_rope_only=True, defaults=(("intermediate_size_mlp", 16384),)),
    # Hunyuan-A13B (Tencent's HunYuanConfig and modeling code): experts per token, expert widths and shared
    # MLPs given per layer, one value for every layer in the published files; one shared MLP of
    # intermediate_size × num_shared_expert beside the routed experts; QK-norm by use_qk_norm
    "hunyuan": Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False,
                      per_layer=("moe_topk", "moe_intermediate_size", "num_shared_expert", "intermediate_size",
                                 "num_experts"),
                      top_k_key="moe_topk", shared_mlp=("use_mixed_mlp_moe", "num_shared_expert"),
                      refused=(("use_cla", "cross-layer attention (use_cla): layers reuse the keys and values of "
                                           "the layer before"),
                               ("moe_layer_num_skipped", "dense layers among its MoE layers (moe_layer_num_skipped)"))),
    # Gemma 4's language model: its global layers differ from its sliding ones, and an MoE block runs
    # beside the dense MLP; refused, saying so, rather than by the first key read otherwise
    "gemma4_text": Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False, act="gelu_pytorch_tanh",
                          refused=(("global_head_dim", "global attention layers of another head dim (global_head_dim) "
                                                       "and key/value head count (num_global_key_value_heads)"),
                                   ("enable_moe_block", "MoE block beside the dense MLP in every layer "
                                                        "(enable_moe_block)"),
                                   # Gemma 4 E2B and E4B, as Gemma 3n: a second embedding table feeding every
                                   # layer, and the last layers attending with an earlier layer's keys and values
                                   ("hidden_size_per_layer_input", "per-layer input embeddings "
                                                                   "(hidden_size_per_layer_input)"),
                                   ("num_kv_shared_layers", "layers that reuse an earlier layer's keys and values "
                                                            "(num_kv_shared_layers)"))),
    # Phi-3-small: block-sparse attention on all but every dense_attention_every_n_layers-th layer
    # (Phi3SmallConfig: 2), a GeGELU MLP ff_intermediate_size wide; refused by its attention, not its activation
    "phi3small": Family(gated=True, norm="layernorm", bias=True, tied=True, parallel=False, act="gegelu",
                        ffn_key="ff_intermediate_size", defaults=(("dense_attention_every_n_layers", 2),),
                        refused=(("dense_attention_every_n_layers", "block-sparse attention (blocksparse_*) on "
                                  "all layers but every dense_attention_every_n_layers-th"),)),
    # MiMo-V2-Flash: sliding-window layers with their own kv heads and head dims among full ones, value
    # heads narrower than keys
    "mimo_v2_flash": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False,
                            refused=(("hybrid_layer_pattern", "sliding-window layers with their own key/value heads "
                                      "and head dims (hybrid_layer_pattern, swa_num_key_value_heads, swa_head_dim) "
                                      "among full-attention ones"),)),
    # Llama 3.2 Vision's language model: a Llama whose cross_attention_layers attend to the image (hf warns)
    "mllama_text_model": _LLAMA,
    # MiniCPM3: DeepSeek-style latent attention whose value heads are hidden / heads wide (no v_head_dim);
    # MiniCPM3Config ties the embeddings
    "minicpm3": Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False, mla_v_from_hidden=True),
    # GLM-4 (THUDM's own ChatGLMConfig): SwiGLU, RMSNorm (its `rmsnorm` key), grouped kv heads
    # (multi_query_group_num), rotary over half of each head, biases on q, k and v where add_qkv_bias says
    "chatglm": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False,
                      rotary="partial_rotary_factor", qkv_bias="add_qkv_bias",
                      defaults=(("partial_rotary_factor", 0.5),)),
    # GLM-4-9B-Chat as transformers builds it (GlmConfig, modular_glm.py): Llama's layer, biases on q, k and v where
    # attention_bias says (true by default; GlmAttention's o_proj and the MLP have none), half of each head rotated by
    # default; its one gate_up_proj (hidden → 2 × intermediate_size) is priced as its two halves, as Phi-3's
    "glm": replace(_LLAMA, rotary="partial_rotary_factor", qkv_bias="attention_bias",
                   defaults=(("partial_rotary_factor", 0.5), ("attention_bias", True))),
    # BitNet b1.58 2B4T (BitNetConfig, modular_bitnet.py): Llama's attention and Gemma's gated MLP (gate_proj,
    # up_proj, down_proj) of squared ReLU: a gated MLP of relu2, which shapewise has no op for, so refused in one line
    # rather than guessed a plain one
    "bitnet": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, act="relu2"),
    # OLMo (1) normalizes with a LayerNorm that has no weight or bias (OlmoLayerNorm), so shapewise's count
    # runs 2 × hidden per norm high (0.01% of OLMo-7B); the op is a LayerNorm's, not an RMSNorm's.
    "olmo": Family(gated=True, norm="layernorm", bias=False, tied=False, parallel=False),
    # MistralConfig and MinistralConfig fill in a 4096-token window where a file leaves sliding_window out (a model
    # without one writes null, as Mistral 7B v0.2 does)
    **{t: Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, window="all",
                 defaults=(("sliding_window", 4096),) if t != "ministral3" else ())
       for t in ("mistral", "ministral", "ministral3")},
    # layer_types name each layer's attention: sliding or full (gpt-oss alternates; EXAONE 4 and OLMo 3 run
    # three sliding layers to one full); EXAONE 4 and OLMo 3 normalize after each block, with QK-norm
    # (the configuration classes' window and pattern where a file leaves them out); EXAONE 4's full layers
    # among sliding ones rotate nothing (Exaone4Attention: "global NoPE for hybrid attention model"); EXAONE 4
    # normalizes each head (RMSNorm(head_dim)), OLMo 3 each whole projection as OLMo-2 (Olmo3Attention)
    "gpt_oss": Family(gated=True, norm="rmsnorm", bias=True, tied=False, parallel=False, window="pattern",
                      experts_at_ffn=True, defaults=(("sliding_window", 128), ("sliding_window_pattern", 2))),
    **{t: Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, qk_norm=True, window="pattern",
                 qk_norm_weights="projection" if t == "olmo3" else "head", nope_global=t != "olmo3", defaults=(("sliding_window", 4096), ("sliding_window_pattern", 4)))
       for t in ("exaone4", "exaone4_5_text", "olmo3")},
    **{t: _QWEN3 for t in ("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text")},
    # dots.llm1 (Dots1Config, modular_dots1.py): Qwen3's attention (QK-norm, attention_bias on q, k, v and o alone)
    # over DeepSeek-V3's MoE, whose keys (first_k_dense_replace, n_shared_experts, ...) hf reads for every type
    "dots1": _QWEN3,
    # Klear (its own KlearConfig and modeling code, model_type "Klear"): Qwen3-MoE's layer, an RMSNorm(head_dim) on
    # queries and keys, sigmoid-routed experts beside n_shared_experts of moe_intermediate_size; its coefficient
    # head (hidden → 2, a bias) that blends the shared and the routed output is left out (4,098 weights a layer)
    "klear": _QWEN3,
    # Apertus (ApertusConfig, modular_apertus.py): Llama's attention with an RMSNorm(head_dim) on queries and keys
    # whatever the file says, and Nemotron's plain MLP (up_proj, down_proj, no bias) of xIELU, untied; xIELU's
    # two learned scalars a layer (alpha_p, alpha_n) are not counted
    "apertus": Family(gated=False, norm="rmsnorm", bias=False, tied=False, parallel=False, act="xielu", qk_norm=True,
                      bias_scope="attention"),
    # Hunyuan-7B and its dense sizes in transformers (HunYuanDenseV1): Llama's layer with an RMSNorm(head_dim) on
    # queries and keys (after the rotation: the same ops), attention_bias on q, k, v and o alone, untied by default
    "hunyuan_v1_dense": _QWEN3,
    # and the MoE ones (HunYuanMoEV1): the same attention; every layer a shared MLP and the routed experts, all
    # intermediate_size wide (HunYuanMoEV1MLP(config)), moe_topk of num_experts a token, either per layer
    "hunyuan_v1_moe": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, qk_norm=True,
                             bias_scope="attention", experts_at_ffn=True, shared_experts=1, top_k_key="moe_topk",
                             per_layer=("moe_topk", "num_experts")),
    # OLMo-2 (Olmo2Attention) normalizes the whole query projection and the whole key projection, a weight
    # per element (RMSNorm(heads × head_dim), RMSNorm(kv heads × head_dim)), not each head
    "olmo2": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, qk_norm=True,
                    qk_norm_weights="projection"),
    # OLMoE (OlmoeConfig, OlmoeAttention, OlmoeSparseMoeBlock): Llama's layout, queries and keys normalized as
    # OLMo-2's (one norm over each whole projection), and experts of intermediate_size with no dense MLP beside them
    "olmoe": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False, qk_norm=True,
                    qk_norm_weights="projection", experts_at_ffn=True),
    "phi3": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False,
                   rotary="partial_rotary_factor", window="all"),
    # Phi-3-vision and Phi-3.5-vision (Phi3VConfig, the checkpoints' own modeling_phi3_v.py): Phi-3-mini's language
    # model beside a CLIP image encoder that img_processor names (hf says it is not priced)
    "phi3_v": Family(gated=True, norm="rmsnorm", bias=False, tied=False, parallel=False,
                     rotary="partial_rotary_factor", window="all"),
    "phimoe": Family(gated=True, norm="layernorm", bias=True, tied=False, parallel=False, window="all",
                     lm_head_bias="lm_head_bias", bias_scope="attention"),
    # StableLM 2 (StableLmConfig): where qk_layernorm says, each query and key head its own LayerNorm(head_dim,
    # bias=False) (StableLmLayerNormPerHead)
    # With use_parallel_residual (StableLM 2 12B) one LayerNorm feeds attention and the MLP: StableLmDecoderLayer
    # builds post_attention_layernorm only without it
    "stablelm": Family(gated=True, norm="layernorm", bias=False, tied=False, parallel=False,
                       rotary="partial_rotary_factor", qkv_bias="use_qkv_bias", qk_norm_weights="per_head",
                       norms_per_layer=1),
    # Command-R: one LayerNorm (no bias) feeds attention and MLP in parallel; CohereConfig ties by default; where
    # use_qk_norm says, each query and key head its own weight (CohereLayerNorm((heads, head_dim)), no bias)
    "cohere": Family(gated=True, norm="layernorm", bias=False, tied=True, parallel=True, norms_per_layer=1,
                     bias_scope="attention", qk_norm_weights="per_head"),
    # Command R7B and Command A (Cohere2Config): Command R's parallel block, a window on three layers in four,
    # and the fourth, global, without rotary embeddings (Cohere2Attention rotates on sliding layers only)
    "cohere2": Family(gated=True, norm="layernorm", bias=False, tied=True, parallel=True, norms_per_layer=1,
                      window="pattern", nope_global=True, bias_scope="attention",
                      defaults=(("sliding_window", 4096), ("sliding_window_pattern", 4))),
    "dbrx": Family(gated=True, norm="layernorm", bias=False, tied=False, parallel=False),
    "gemma": Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False, act="gelu_pytorch_tanh",
                    bias_scope="attention"),
    "gemma2": _GEMMA2,
    "gemma3_text": Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False, act="gelu_pytorch_tanh",
                          norms_per_layer=4, qk_norm=True, window="pattern", softcap=True, bias_scope="attention",
                          # Gemma3TextConfig.__init__'s defaults (transformers, models/gemma3/configuration_gemma3.py)
                          defaults=(("vocab_size", 262_208), ("hidden_size", 2304), ("intermediate_size", 9216),
                                    ("num_hidden_layers", 26), ("num_attention_heads", 8),
                                    ("num_key_value_heads", 4), ("head_dim", 256),
                                    ("max_position_embeddings", 131_072), ("sliding_window", 4096),
                                    ("sliding_window_pattern", 6))),
    "gpt2": Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, act="gelu_new",
                   positions="gpt2"),
    "gpt_bigcode": Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False,
                          act="gelu_pytorch_tanh", positions="gpt2"),
    # GPT-Neo (GPTNeoConfig): its "local" layers (attention_layers, expanded from attention_types) attend over the
    # window_size keys before each query, its "global" ones over all (hf reads them as layer_types and
    # sliding_window); GPTNeoSelfAttention's q_proj, k_proj and v_proj carry no biases, its out_proj and the MLP's
    # c_fc and c_proj do
    "gpt_neo": Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, act="gelu_new",
                      positions="gpt_neo", window="pattern", bias_scope="mlp", out_bias=True),
    # TeleChat and TeleChat2 (their own TelechatConfig and modeling code, model_type "telechat"): Llama's layer under
    # its own keys (n_layer, n_head, ffn_hidden_size), RMSNorms (MixedFusedRMSNorm), a SwiGLU whatever the file says,
    # biases on the attention's dense and the MLP's down_proj alone (query, key_value, gate_proj and up_proj:
    # bias=False); tied where the file leaves it out (TelechatConfig passes PretrainedConfig's default); with
    # embed_layernorm an RMSNorm over the embeddings
    "telechat": Family(gated=True, norm="rmsnorm", bias=False, tied=True, parallel=False, act="silu",
                       ffn_key="ffn_hidden_size", out_bias=True, bias_fixed=True),
    "opt": Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, act="relu", positions="opt"),
    "btlm": Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, act="gelu_new",
                   positions="btlm"),
    "gptj": Family(gated=False, norm="layernorm", bias=True, tied=False, parallel=True, act="gelu_new",
                   rotary="rotary_dim", norms_per_layer=1, lm_head_bias="always", bias_scope="mlp"),
    "gpt_neox": _NEOX,
    # where qk_layernorm says, LayerNorm(head_dim) on queries and keys, weight and bias shared by the heads
    "phi": Family(gated=False, norm="layernorm", bias=True, tied=False, parallel=True, act="gelu_new",
                  rotary="partial_rotary_factor", norms_per_layer=1, lm_head_bias="always", qk_norm_weights="head_bias",
                  bias_fixed=True, defaults=(("partial_rotary_factor", 0.5),)),
    "bloom": Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, act="gelu",
                    positions="alibi", embed_norm=True),
    "mpt": Family(gated=False, norm="layernorm", bias=False, tied=True, parallel=False, act="gelu",
                  positions="alibi"),
    # Nemotron-4 and Minitron (NemotronConfig): a plain MLP of squared ReLU (relu2), LayerNorms with weight and
    # bias (LayerNorm1P), no biases on the linears, half of each head rotated
    "nemotron": Family(gated=False, norm="layernorm", bias=False, tied=False, parallel=False, act="relu2",
                       rotary="partial_rotary_factor", defaults=(("partial_rotary_factor", 0.5),)),
    # Arcee AFM (ArceeConfig, modular_arcee.py): Llama's attention and RMSNorms with Nemotron's plain MLP of squared
    # ReLU (up_proj, down_proj), biases where attention_bias and mlp_bias say (false by default), untied by default
    "arcee": replace(_LLAMA, gated=False, act="relu2"),
    "starcoder2": Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False,
                         act="gelu_pytorch_tanh", window="all"),
    # Persimmon (PersimmonConfig): a plain squared-ReLU MLP, LayerNorms, biases on every linear, half of each head
    # rotated, and where qk_layernorm says LayerNorm(head_dim) on queries and keys, weight and bias shared by the heads
    "persimmon": Family(gated=False, norm="layernorm", bias=True, tied=False, parallel=False, act="relu2",
                        qk_norm=True, qk_norm_weights="head_bias", rotary="partial_rotary_factor",
                        defaults=(("partial_rotary_factor", 0.5),)),
    **{t: _FALCON for t in ("falcon", "refinedwebmodel", "refinedweb")},
}
# A multimodal wrapper's text_config holds only the fields that differ from its type's configuration
# class (transformers writes nested configs so): LLaVA's names model_type "llama" and its vocabulary, and
# LlamaConfig's defaults are the rest. Applied to nested configs only; a config.json of its own is whole.
NESTED_DEFAULTS = {"llama": (("vocab_size", 32000), ("hidden_size", 4096), ("intermediate_size", 11008),
                             ("num_hidden_layers", 32), ("num_attention_heads", 32),
                             ("max_position_embeddings", 2048)),
                   # Qwen2Config's (Qwen2-Audio's text_config names model_type "qwen2", its MLP width and vocabulary)
                   "qwen2": (("vocab_size", 151936), ("hidden_size", 4096), ("intermediate_size", 22016),
                             ("num_hidden_layers", 32), ("num_attention_heads", 32),
                             ("max_position_embeddings", 32768))}
# Phi-1.5's and Phi-2's first configs (Microsoft's own modeling code): Phi's layout, each head rotating its
# rotary_dim dims (PhiConfig's partial_rotary_factor is not theirs)
FAMILIES["phi-msft"] = FAMILIES["mixformer-sequential"] = replace(FAMILIES["phi"], rotary="rotary_dim", defaults=())
# ChatGLM-6B's first layout (its own ChatGLMConfig, model_type "chatglm" as ChatGLM2's and 3's): GLM blocks of
# LayerNorms, biases on every linear, a plain GELU MLP inner_hidden_size wide, one key/value head a query head, each
# half of a head rotated by its own position (position_encoding_2d: the whole head rotated); its lm_head is tied to
# the word embeddings (PretrainedConfig's default), which makes the "6.2B" of its name
_CHATGLM_6B = Family(gated=False, norm="layernorm", bias=True, tied=True, parallel=False, act="gelu",
                     ffn_key="inner_hidden_size")
# TeleChat-52B (its own TELECHATConfig and GPT-2-derived code, under TeleChat's model_type): a fused c_attn, a SwiGLU
# whose c_fc holds both halves of n_inner (activation_function silu), norms of use_RMSNorm's kind, biases where
# add_bias_linear says (TELECHATConfig's defaults: LayerNorms, biases), rotary heads (relative_encoding "rotary"),
# GPT-2's keys (n_embd, n_inner)
_TELECHAT_52B = Family(gated=True, norm="layernorm", bias=True, tied=True, parallel=False, act="silu")
# A type whose other layout is told by a key the rest of its files lack: (type, key) → the rule that layout is read
# by.
FIRST_LAYOUTS = {("chatglm", "position_encoding_2d"): _CHATGLM_6B, ("telechat", "n_embd"): _TELECHAT_52B}
# LLaVA's own code (model_type "llava" before transformers' wrapper took the name, a vision tower its mm_vision_tower
# names, the language model's keys at the top level) builds the language model on the transformers class its own
# class names: LlavaLlamaForCausalLM(LlamaForCausalLM, ...), and LLaVA-NeXT's LlavaQwenForCausalLM(Qwen2ForCausalLM,
# ...), LlavaMistralForCausalLM and LlavaMixtralForCausalLM alike (llava/model/language_model/). The class, not the
# type, tells the rule: the class → the type whose rule reads it (no architectures: the first LLaVA's Llama)
LLAVA_OWN_LANGUAGE_MODELS = {"LlavaLlamaForCausalLM": "llama", "LlavaQwenForCausalLM": "qwen2",
                             "LlavaMistralForCausalLM": "mistral", "LlavaMixtralForCausalLM": "mixtral"}
# MiniCPM-V's own code (model_type "minicpmv", class MiniCPMV in every version) builds its language model by the
# file's `version`, as vLLM's minicpmv.py dispatches: 2.0 on MiniCPM, 2.5 on Llama 3, 2.6 on Qwen2 (q, k and v
# biases), 4.0 on Llama, 4.5 on Qwen3; a file without one is 2.0 where 2304 wide with 64 queries, else 2.5
MINICPMV_LANGUAGE_MODELS = {(2, 0): "minicpm", (2, 5): "llama", (2, 6): "qwen2", (4, 0): "llama", (4, 5): "qwen3"}
# Baichuan's code rotates the heads of a model this wide (Baichuan-7B, Baichuan2-7B) and gives any other ALiBi
# biases (vLLM's BaichuanForCausalLM: "Baichuan 13B and Baichuan2 7B/13B")
BAICHUAN_ROTARY_HIDDEN = 4096
# GLM-4-0414 and GLM-Z1 (Glm4Config, modular_glm4.py): GLM's layer with a norm on each block's output besides
# the two before them (post_self_attn_layernorm, post_mlp_layernorm): four RMSNorms a layer, as Gemma 2's
FAMILIES["glm4"] = replace(FAMILIES["glm"], norms_per_layer=4)
# GLM-4.1V (Glm4vTextDecoderLayer: the same four RMSNorms, q, k and v biases by attention_bias, half of each head
# rotated); its first files put the text model's keys at the top level, later ones in text_config (glm4v_text)
FAMILIES["glm4v"] = FAMILIES["glm4v_text"] = FAMILIES["glm4"]
FALCON_TYPES = ("falcon", "refinedwebmodel", "refinedweb")
# Types whose code makes the MLP 4 × hidden wide where the file gives no width (GPT2MLP's n_inner None, GPT-J's,
# GPTBigCode's and Phi-2's first code alike; GPTNeoConfig's intermediate_size None; BloomMLP and FalconMLP always
# unless ffn_hidden_size; MPT's expansion_ratio 4). Any other type's configuration class fills in a width of its own
# (ArceeConfig 18432, LlamaConfig 11008): a file of such a type that gives none is priced 4 × hidden, and says so.
FFN_FOUR_TIMES_HIDDEN = frozenset({"gpt2", "gptj", "gpt_bigcode", "gpt_neo", "btlm", "bloom", "mpt", "phi-msft",
                                   "mixformer-sequential", *FALCON_TYPES})

# Architectures whose layers are not (all) attention blocks: shapewise has no ops for their state-space
# or recurrent layers, so it refuses them rather than price them as transformers.
NOT_ATTENTION = {
    "mamba": "a Mamba state-space model", "mamba2": "a Mamba-2 state-space model",
    "falcon_mamba": "a Mamba state-space model", "jamba": "a Mamba/attention hybrid",
    "zamba": "a Mamba/attention hybrid", "zamba2": "a Mamba/attention hybrid", "bamba": "a Mamba/attention hybrid",
    "falcon_h1": "a Mamba/attention hybrid", "nemotron_h": "a Mamba/attention hybrid",
    "granitemoehybrid": "a Mamba/attention hybrid", "plamo2": "a Mamba/attention hybrid",
    "recurrent_gemma": "a recurrent (Griffin) model",
    "rwkv": "an RWKV recurrent model", "rwkv5": "an RWKV recurrent model", "rwkv6": "an RWKV recurrent model",
    "rwkv7": "an RWKV recurrent model", "xlstm": "an xLSTM recurrent model", "lfm2": "a convolution/attention hybrid",
    "qwen3_next": "a linear-attention hybrid", "minimax_text_01": "a linear-attention hybrid",
    # Qwen3.5: refused by its type too, for a file that leaves out the layer_types that name its linear layers
    **{t: "a linear-attention hybrid" for t in ("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")},
    "kimi_linear": "a linear-attention (Kimi Delta Attention) hybrid",
    # Ring-linear 2.0 (BailingMoeLinearV2): softmax attention on every layer_group_size-th layer, linear
    # attention on the others, named by no layer_types
    "bailing_moe_linear": "a linear-attention hybrid",
}
# Types whose code builds what shapewise has no ops for, whatever the file says: refused, saying what it is.
UNMODELLED_TYPES = {
    # Trinity (AfmoeAttention): o_proj(attention · sigmoid(gate_proj(x))), gate_proj hidden → heads × head_dim
    "afmoe": "sigmoid gate on every attention output (AfmoeAttention's gate_proj, hidden → heads × head_dim)",
    # JetMoE (JetMoeAttention, JetMoeMoA): a token's queries come from, and its attention output goes through, the
    # top-k of num_local_experts attention experts (input_linear, output_linear), keys and values from one kv_proj
    "jetmoe": "mixture of attention heads: queries and output projection from top-k attention experts a token "
              "(JetMoeMoA)",
    # Gemma 3n (Gemma3nTextDecoderLayer): AltUp's altup_num_inputs predicted residual streams, a LAuReL low-rank
    # branch beside attention (laurel_rank) and a per-layer input embedding gated into every layer
    # (hidden_size_per_layer_input): read as a type of no rule, it was guessed Llama's layer with none of them
    "gemma3n_text": "AltUp residual streams, LAuReL branch and per-layer input embeddings every layer "
                    "(Gemma3nTextDecoderLayer)",
}
# Architectures (by the start of their name, lowercased) whose code builds what shapewise has no ops for, where the
# file names no model type to refuse by (CogVLM's remote code writes none).
UNMODELLED_ARCHITECTURES = {
    # CogVLM and CogVLM2 (VisionExpertAttention, VisionExpertMLP): every layer holds a second query/key/value
    # projection, output projection and MLP for image tokens beside the language ones, each token run through the
    # set of its kind: read as one Llama layer, the count was half the layers' weights
    "cogvlm": "visual expert: a second set of attention and MLP weights a layer for image tokens (CogVLM's "
              "VisionExpertAttention and VisionExpertMLP)",
    # EAGLE draft heads (SGLang's LlamaForCausalLMEagle and LlamaForCausalLMEagle3, vLLM's Eagle3LlamaForCausalLM):
    # one decoder layer whose attention reads its own embedding beside the target model's hidden state (q, k and v
    # from 2 × hidden), those states first fused by an fc, a head over draft_vocab_size rows; model_type "llama", so
    # read as one, it was priced as a one-layer Llama of the target's vocabulary, as if it ran alone
    **dict.fromkeys(("llamaforcausallmeagle", "eagle3"),
                    "EAGLE draft head: one layer over its embedding and the target model's hidden states, run "
                    "beside that target model, not a model of its own"),
}
# Encoder-only models (BERT and its kin): every token attends to every other, after a learned position table
# and token types, with no causal language-model head; shapewise prices decoder-only transformers.
ENCODER_ONLY = ("bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "distilbert", "albert", "electra", "deberta",
                "deberta-v2", "camembert", "mpnet", "modernbert", "nomic_bert", "megatron-bert", "roformer", "ernie",
                "clip_text_model")
# Image encoders (CLIP's and SigLIP's towers, ViTs) and CLIP's image and text pair: no language-model head to price.
VISION_ONLY = ("clip", "clip_vision_model", "siglip", "siglip_vision_model", "siglip2_vision_model",
               "vit", "vit_mae", "dinov2", "deit", "beit", "swin", "swinv2", "convnext", "pixtral")
# Keys that only hybrid or recurrent configs carry: an unknown type with one of them is refused too.
NOT_ATTENTION_KEYS = ("mamba_d_state", "ssm_cfg", "state_size", "attn_layer_period", "block_types",
                      "_block_types", "layers_block_type", "hybrid_override_pattern", "lru_width",
                      "linear_attn_config")

# Activations by the MLP they make: a gated family's activation picks SwiGLU or GeGLU; a plain one GELU
# or ReLU (xIELU is priced as GELU). Anything else is refused rather than guessed.
ACTIVATIONS = {
    "silu": "swiglu", "swish": "swiglu", "swiglu": "swiglu",
    "swigluoai": "swiglu",  # OpenAI's clamped SwiGLU ((up + 1) · gate · σ(α · gate)): the same three matrices
    "gelu": "geglu", "gelu_new": "geglu", "gelu_pytorch_tanh": "geglu", "gelu_fast": "geglu",
    "gelu_python": "geglu", "gelu_accurate": "geglu", "geglu": "geglu",
    "relu": "relu", "relu2": "relu",
    "xielu": "xielu",  # Apertus's (quadratic above zero, expm1 below): one elementwise op, as GELU's; no gated kind
}


def families_text() -> str:
    """What `shapewise models` says about config.json files beside its presets."""
    refused = "; ".join([*(f"{name}: {what}" for name, family in sorted(FAMILIES.items()) for _, what in family.refused),
                         *(f"{name}: {what}" for name, what in sorted(UNMODELLED_TYPES.items())),
                         *(f"architectures {name}…: {what}" for name, what in sorted(UNMODELLED_ARCHITECTURES.items()))])
    return (f"Hugging Face config.json (--config PATH, or a hub id from the local cache) is read by its own "
            f"rules for model types {', '.join(sorted(FAMILIES))} (refusing, with the reason, what it cannot "
            f"price: {refused}); a multimodal wrapper (gemma3, ...) by its "
            f"text_config, with a warning that its vision encoder is not priced; other types are read with a "
            f"warning naming each guessed field (refused with --strict); refused as not attention transformers: "
            f"{', '.join(sorted(NOT_ATTENTION))}; refused as encoder-only models: "
            f"{', '.join(sorted(ENCODER_ONLY))}.")
