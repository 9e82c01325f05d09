"""The LLM judge's two paths (evaluators.scoring.judge.judge_verdict): structured output where the
model supports it, the one-word prompt read by parse_verdict otherwise.

The remote judge API is stood in for by ``tests/fakes.py``'s FakeOpenAIServer (a FAKE
OpenAI-compatible server on loopback, replying a fixed text), reached through memkit's
real model factory and langchain-openai's real client; a model without structured output
is langchain-core's scripted GenericFakeChatModel (a FAKE, no judging).
"""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from evaluators.scoring.judge import JudgeParseError, judge_correct, judge_prompt, judge_verdict
from memkit.models.chat import chat_model
from tests.fakes import FakeOpenAIServer

Q, A, REF, QTYPE = "How many coins do I have?", "You had 38, now you have 35.", 38, "knowledge-update"


def _judge(server: FakeOpenAIServer):
    return chat_model("openai:fake-gpt", base_url=server.base_url, api_key="not-needed", max_retries=0)


@pytest.mark.timeout(60)
def test_structured_verdict_through_an_openai_compatible_api():
    reply = '{"correct": false, "reason": "Yes, 38 is mentioned, but 35 is given as current."}'
    with FakeOpenAIServer(reply=reply) as server:
        v = judge_verdict(_judge(server), Q, A, REF, QTYPE)
    # the key decides, not the "Yes" of the reason
    assert (v.correct, v.method, v.structured_error) == (False, "structured", None)
    assert v.reason == "Yes, 38 is mentioned, but 35 is given as current."
    (body,) = server.requests  # one call, asking for the schema
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema"
    assert schema["properties"]["correct"]["type"] == "boolean" and "reason" in schema["properties"]
    assert body["messages"][-1]["content"] == judge_prompt(Q, A, REF, QTYPE, structured=True)
    assert "yes or no" not in body["messages"][-1]["content"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("reply", "verdict"),
    [("Yes or no: no", False), ("The reply gives 35, not 38, so I cannot say yes. No.", False),
     ("**Yes**", True), ("correct: false, reason: 35 is current", False)],
)
def test_a_server_that_ignores_the_schema_is_read_from_its_words(reply, verdict):
    with FakeOpenAIServer(reply=reply) as server:  # replies text whatever was asked
        v = judge_verdict(_judge(server), Q, A, REF, QTYPE)
    assert (v.correct, v.method, v.reply) == (verdict, "structured", reply)
    assert v.structured_error.startswith("ValidationError")  # the reply was not the schema's JSON
    assert len(server.requests) == 1 and "response_format" in server.requests[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reply", ["I cannot decide.", "Yes or no", '{"correct": tr'])
def test_no_verdict_to_the_structured_prompt_asks_the_one_word_prompt(reply):
    with FakeOpenAIServer(reply=reply) as server:
        v = judge_verdict(_judge(server), Q, A, REF, QTYPE)
    assert (v.correct, v.method, v.reply, v.unparsed) == (None, "text", reply, True)
    assert v.structured_error.startswith("ValidationError")
    first, second = server.requests
    assert "response_format" in first and "response_format" not in second
    assert second["messages"][-1]["content"] == judge_prompt(Q, A, REF, QTYPE)


def test_a_reply_cut_by_max_tokens_keeps_its_verdict_key():
    """openai's LengthFinishReasonError (raised by the real client when finish_reason is
    "length") carries the cut reply; the verdict key comes first in the schema."""
    import openai
    from openai.types.chat import ChatCompletion

    from evaluators.scoring.judge import _reply_of_error

    cut = ChatCompletion.model_validate({
        "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "length",
                     "message": {"role": "assistant", "content": '{"correct": false, "rea'}}],
    })
    raw = _reply_of_error(openai.LengthFinishReasonError(completion=cut))
    assert raw == '{"correct": false, "rea'
    assert _reply_of_error(RuntimeError("connection refused")) is None


@pytest.mark.timeout(60)
def test_structured_false_asks_the_one_word_prompt_only():
    with FakeOpenAIServer(reply="No.") as server:
        v = judge_verdict(_judge(server), Q, A, REF, QTYPE, structured=False)
    assert (v.correct, v.method, v.structured_error) == (False, "text", None)
    assert len(server.requests) == 1 and "response_format" not in server.requests[0]


def test_a_model_without_structured_output_is_read_from_text():
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Yes or no: no")]))
    v = judge_verdict(model, Q, A, REF, QTYPE)
    assert (v.correct, v.method, v.structured_error) == (False, "text", None)
    # an unparsed reply is never yes: judge_correct raises, or counts it as no when told
    with pytest.raises(JudgeParseError, match="no yes/no verdict"):
        judge_correct(GenericFakeChatModel(messages=iter([AIMessage(content="Yes or no")])), Q, A, REF, QTYPE)
    unclear = GenericFakeChatModel(messages=iter([AIMessage(content="Probably yes")]))
    assert judge_correct(unclear, Q, A, REF, QTYPE, on_unparsed="false") is False


class FakeParserFailingJudge(GenericFakeChatModel):
    """A FAKE model whose structured output comes back unparsed by the provider's parser
    (``include_raw``: ``parsed`` None), as ChatOllama's does when the model ignores the
    schema; its plain replies come from the script."""

    structured_reply: str = ""

    def with_structured_output(self, schema, *, include_raw=False, **kwargs):
        from langchain_core.runnables import RunnableLambda

        raw = AIMessage(content=self.structured_reply)
        return RunnableLambda(lambda _: {"raw": raw, "parsed": None, "parsing_error": ValueError("no JSON")})


def test_an_unparsed_structured_reply_is_read_then_asked_again_in_one_word():
    # the structured reply states a verdict in words: read, no second call
    model = FakeParserFailingJudge(structured_reply="Final answer: no", messages=iter([]))
    v = judge_verdict(model, Q, A, REF, QTYPE)
    assert (v.correct, v.method, v.structured_error) == (False, "structured", None)
    # no verdict in it: the one-word prompt is asked, and its reply read
    model = FakeParserFailingJudge(structured_reply='{"reason": "unsure"}',
                                   messages=iter([AIMessage(content="Yes.")]))
    v = judge_verdict(model, Q, A, REF, QTYPE)
    assert (v.correct, v.method, v.reply) == (True, "text", "Yes.")
    assert v.structured_error.startswith("no clear verdict in the structured reply")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("reply", ['{"correct": "incorrect", "reason": "Yes, 38 is there."}',
                                   '{"reason": "Yes, that is a clear mismatch"}',
                                   '{"correct": 1, "reason": "Yes."}',
                                   '{"correct": "yes, wait no", "reason": "x"}'])
def test_a_structured_reply_without_a_typed_verdict_is_unparsed(reply):
    """The schema's ``correct`` is a boolean: a JSON reply breaking it is unparsed (the
    one-word prompt is asked; this server answers the same JSON, unparsed again), never
    read from its reason's words or from pydantic's lax bool."""
    with FakeOpenAIServer(reply=reply) as server:
        v = judge_verdict(_judge(server), Q, A, REF, QTYPE)
    assert (v.correct, v.method, v.unparsed) == (None, "text", True)
    assert v.structured_error.startswith("ValidationError")
    assert len(server.requests) == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("reply", "verdict"), [('{"correct": "yes", "reason": "No doubt."}', True),
                                                ('{"correct": "No", "reason": "Yes at first."}', False)])
def test_the_schema_words_are_a_structured_verdict(reply, verdict):
    with FakeOpenAIServer(reply=reply) as server:
        v = judge_verdict(_judge(server), Q, A, REF, QTYPE)
    assert (v.correct, v.method, v.structured_error) == (verdict, "structured", None)


def test_an_unparsed_structured_reply_is_not_read_from_its_prose():
    model = FakeParserFailingJudge(structured_reply='{"correct": "incorrect", "reason": "Yes."}',
                                   messages=iter([AIMessage(content="No.")]))
    v = judge_verdict(model, Q, A, REF, QTYPE)
    assert (v.correct, v.method, v.reply) == (False, "text", "No.")
