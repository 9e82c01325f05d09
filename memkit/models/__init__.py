"""Chat models by spec (:mod:`memkit.models.chat`): memkit's model-free ``extractive``
backend (:mod:`memkit.models.extractive`), llama.cpp in process
(:mod:`memkit.models.llamacpp`), and any LangChain provider; the MiniLM embedder."""

from memkit.models.chat import (
    EMBEDDING_DIM,
    LLAMACPP_ALIASES,
    MiniLMEmbeddings,
    ModelSpecError,
    TokenUsage,
    add_usage,
    answer_many,
    cache_dir,
    chat_model,
    check_llamacpp,
    check_spec,
    embeddings,
    minilm_path,
    rate_limiter,
    resolve_gguf,
    retryable_errors,
    token_usage,
)

__all__ = ["EMBEDDING_DIM", "LLAMACPP_ALIASES", "MiniLMEmbeddings", "ModelSpecError", "TokenUsage", "add_usage",
           "answer_many", "cache_dir", "chat_model", "check_llamacpp", "check_spec", "embeddings", "minilm_path",
           "rate_limiter", "resolve_gguf", "retryable_errors", "token_usage"]
