"""Energy windows for test and benchmark packets: steady power sampled once a second around each
window, the counter consistent with it, judged by catalog/model/energy.py like the runner's."""

from __future__ import annotations

from catalog.checks.energy import concurrency_tokens, level_tokens, server_tokens, suite_prompt_tokens
from catalog.model.arrays import to_int64, to_uint32
from catalog.model.energy import US, CardTrace, EnergyBounds, EnergySetup, EnergyWindow, Tokens, judge_window
from catalog.model.packet import PacketParts, ServerRun

SOURCES = ["xpu-smi dump power.draw (card, W)", "hwmon energy1_input (card, µJ)"]
IDLE_W = 31.86  # the rendered xpu-smi 2.x dump's first row (research/smi: illustrative B70 idle)


def steady_card(watts: float, duration_us: int, device: int = 0, origin_j: float = 18734.52) -> CardTrace:
    """One card at constant power, a sample a second from 1 s before the window to 1 s after."""
    seconds = duration_us / US
    times = [-1.0 + k for k in range(int(seconds) + 3)]
    return CardTrace(
        device=device,
        power_source=SOURCES[0],
        counter_source=SOURCES[1],
        power_t_us=to_int64(round(t * US) for t in times),
        power_mw=to_uint32(round(watts * 1000) for _ in times),
        counter_t_us=to_int64(round(t * US) for t in times),
        counter_uj=to_int64(round((origin_j + watts * (t + 1.0)) * US) for t in times),
    )


def steady_window(
    watts: float, duration_us: int, tokens: Tokens, idle_w: dict[int, float] | None, cards: int = 1
) -> EnergyWindow:
    return judge_window(
        [steady_card(watts, duration_us, device) for device in range(cards)],
        duration_us,
        EnergyBounds(),
        tokens,
        idle_w,
    )


def _suite_us(server: ServerRun) -> int:
    return sum(row.token_times_us[-1] for row in server.rows if row.token_times_us) + 1000 * len(server.rows)


def with_energy(parts: PacketParts, watts: float = 180.0, idle: float = IDLE_W) -> PacketParts:
    """The parts with an idle baseline and a steady window over every server's suite, concurrency
    point and load level (each arm's cards at `watts`), as a runner on a B70 would record them."""
    cards = max(arm.config.tensor_parallel_size for arm in parts.arms)
    idle_window = steady_window(idle, 10 * US, Tokens(0, 0), None, cards)
    setup = EnergySetup(sources=SOURCES, interval_ms=1000, bounds=EnergyBounds(), idle=idle_window)
    idle_w = setup.idle_w()
    arms = []
    for arm in parts.arms:
        tp = arm.config.tensor_parallel_size
        servers = [
            server.model_copy(
                update={"energy": steady_window(watts, _suite_us(server), server_tokens(server), idle_w, tp)}
            )
            if server.rows
            else server
            for server in arm.servers
        ]
        arms.append(arm.model_copy(update={"servers": servers}))
    prompt_tokens = suite_prompt_tokens(arms)
    by_arm = {arm.id: arm for arm in arms}
    ladders = []
    for ladder in parts.ladders:
        arm = by_arm[ladder.arm]
        tp = arm.config.tensor_parallel_size
        rows = arm.servers[0].rows if arm.servers else []
        points = [
            point.model_copy(
                update={
                    "energy": steady_window(
                        watts, round(point.wall_s * US), concurrency_tokens(point, rows), idle_w, tp
                    )
                }
            )
            for point in ladder.concurrency
        ]
        load = ladder.load
        if load is not None:
            levels = [
                level.model_copy(
                    update={
                        "energy": steady_window(
                            watts, round(level.duration_s * US), level_tokens(level, prompt_tokens), idle_w, tp
                        )
                    }
                )
                for level in load.levels
            ]
            load = load.model_copy(update={"levels": levels})
        ladders.append(ladder.model_copy(update={"concurrency": points, "load": load}))
    return parts.model_copy(update={"arms": arms, "ladders": ladders, "energy": setup})


def with_gap(window: EnergyWindow, start_s: float, end_s: float, idle_w: dict[int, float] | None) -> EnergyWindow:
    """The window with its power samples between start_s and end_s dropped (a stalled tool), judged again."""
    cards = []
    for card in window.cards:
        keep = [k for k, t in enumerate(card.power_t_us) if not start_s * US <= t <= end_s * US]
        cards.append(
            card.model_copy(
                update={
                    "power_t_us": to_int64(card.power_t_us[k] for k in keep),
                    "power_mw": to_uint32(card.power_mw[k] for k in keep),
                }
            )
        )
    figures = window.figures
    tokens = Tokens(0, 0)
    if figures is not None and figures.j_per_output_token and figures.j_per_total_token:
        tokens = Tokens(
            round(figures.energy_j / figures.j_per_output_token), round(figures.energy_j / figures.j_per_total_token)
        )
    return judge_window(cards, window.duration_us, EnergyBounds(), tokens, idle_w)
