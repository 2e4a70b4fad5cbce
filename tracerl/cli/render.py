"""Rich renderings of episodes and span trees for the terminal."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.tree import Tree

from tracerl.core import semconv as sc
from tracerl.core.spans import SpanRecord
from tracerl.core.types import Episode, Step


def _preview(text: str | None, width: int = 70) -> str:
    text = " ".join((text or "").split())
    return escape(text if len(text) <= width else text[: width - 1] + "…")


def _step_label(step: Step) -> str:
    seq = "-" if step.sequence is None else str(step.sequence)
    out = step.output_message
    said = _preview(out.content) if out and out.content else ""
    if out and out.tool_calls:
        said += " " + ", ".join(f"[cyan]{escape(tc.name)}({_preview(tc.arguments, 30)})[/]" for tc in out.tool_calls)
    tokens = (
        f"{len(step.prompt_ids or [])}+{len(step.response_ids or [])} tok"
        if step.has_tokens else "[yellow]no token ids[/]"
    )
    reward = f" reward={step.reward:g}" if step.reward is not None else ""
    node = f" node={escape(step.metadata['node'])}" if step.metadata.get("node") else ""
    return f"#{seq} {tokens} {step.finish_reason or ''}{reward}{node}  {said}"


def episode_tree(ep: Episode, *, traceback: bool = False) -> Tree:
    reward = "-" if ep.reward is None else f"{ep.reward:g}"
    head = (f"[bold]episode {escape(ep.id)}[/]  {ep.termination_reason.value}  reward={reward}"
            + (f"  correct={ep.is_correct}" if ep.is_correct is not None else ""))
    tree = Tree(head)
    if ep.task is not None:
        tree.add(f"task {escape(ep.task.id)}: {_preview(str(ep.task.data), 90)}")
    if ep.error:
        error = tree.add(f"[red]error: {escape(ep.error)}[/]")
        if traceback and ep.traceback:
            error.add(escape(ep.traceback.rstrip()))
    for traj in ep.trajectories:
        masked = sum(sum(s.mask) for s in traj.sequences)
        total = sum(len(s) for s in traj.sequences)
        branch = tree.add(
            f"[bold]{escape(traj.name)}[/]  {len(traj.steps)} steps, {len(traj.sequences)} sequences "
            f"({masked}/{total} model tokens), prefix breaks={traj.prefix_breaks}, "
            f"reward={'-' if traj.reward is None else f'{traj.reward:g}'}"
        )
        for step in traj.steps:
            branch.add(_step_label(step))
    return tree


def _span_label(s: SpanRecord) -> str:
    a = s.attributes
    kind = a.get(sc.SPAN_TYPE) or a.get("gen_ai.operation.name") or a.get("openinference.span.kind") or ""
    extra = ""
    if sc.is_reward_span(a):
        extra = f" {a.get(sc.REWARD_NAME)}={a.get(sc.REWARD_VALUE)}"
    elif sc.PROMPT_IDS in a:
        extra = f" seq={a.get(sc.SEQUENCE)}"
    status = " [red]ERROR[/]" if s.status_code == "ERROR" else ""
    label = f"{escape(s.name)} [dim]{escape(str(kind))} {s.duration_s * 1000:.1f}ms{extra}[/]{status}"
    if sc.is_tool_span(a) and a.get("gen_ai.tool.call.arguments") is not None:
        label += f"  [cyan]{_tool_input(a['gen_ai.tool.call.arguments'])}[/]"
        if a.get("gen_ai.tool.call.result") is not None:
            label += f" [dim]→ {_preview(str(a['gen_ai.tool.call.result']), 60)}[/]"
    elif "tracerl.shell.exit_code" in a:  # a terminal task's setup or test run
        label += f" [dim]exit {a['tracerl.shell.exit_code']}: {_preview(str(a.get('tracerl.shell.output', '')), 60)}[/]"
    return label


def _tool_input(arguments: Any) -> str:
    """A tool call's input as a reader wants it: a shell command as the command, else the arguments."""
    import json

    value = arguments
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments)
        except ValueError:
            value = arguments
    if isinstance(value, dict) and isinstance(value.get("command"), str):
        return _preview("$ " + value["command"], 90)
    return _preview(arguments if isinstance(arguments, str) else json.dumps(arguments), 90)


def span_tree(records: list[SpanRecord]) -> Tree:
    """Spans nested by parent id; spans whose parent is missing hang off the root."""
    ids = {(r.trace_id, r.span_id) for r in records}
    children: dict[tuple[str, str] | None, list[SpanRecord]] = {}
    for r in records:
        parent = (r.trace_id, r.parent_span_id) if r.parent_span_id else None
        children.setdefault(parent if parent in ids else None, []).append(r)
    root = Tree(f"[bold]spans[/] ({len(records)})")

    def add(node: Tree, key: tuple[str, str] | None, depth: int) -> None:
        for r in sorted(children.get(key, []), key=lambda r: r.start_ns):
            child = node.add(_span_label(r))
            if depth < 50:
                add(child, (r.trace_id, r.span_id), depth + 1)

    add(root, None, 0)
    return root


def sequences(ep: Episode, tokenizer: Any) -> Tree:
    """Each trajectory's training sequences, token by token: model tokens (mask 1) bold blue,
    inserted ones (prompt, tool results, template) dim; a prefix break starts a new sequence."""
    from rich.text import Text

    tree = Tree("[bold]training sequences[/] (model tokens [bold blue]blue[/], inserted [dim]dim[/])")
    decode = tokenizer.decode
    for traj in ep.trajectories:
        branch = tree.add(f"[bold]{escape(traj.name)}[/]: {len(traj.sequences)} sequence(s)")
        for i, seq in enumerate(traj.sequences):
            text = Text()
            for token, mask in zip(seq.token_ids, seq.mask):
                text.append(decode([token]), style="bold blue" if mask else "dim")
            label = f"sequence {i}: {len(seq)} tokens, {sum(seq.mask)} masked in" + (" (after a prefix break)" if i else "")
            branch.add(label).add(text)
    return tree
