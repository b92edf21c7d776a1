// Costs: what the tenant spent over a period, per UTC day by model, agent or strategy, its
// costliest tasks, spend by model, by agent and by strategy, and how much of its cost limits today and the last hour
// used. Every figure is the costs API's own (exact decimal strings); only axes are formatted.
import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from "chart.js";
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { download } from "../api.js";
import { Card, Empty, ErrorNote, IdLink, Loading, Page, Stat } from "../components.jsx";
import { count, usd } from "../format.js";
import { useAction, useApi } from "../hooks.js";
import { useSession } from "../session.js";
// Its stylesheet is bundled with the console's (app.jsx): this module loads on demand.

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Tooltip, Legend);

const DAY_MS = 86_400_000;
const PERIODS = [7, 30, 90];
const MAX_GROUPS = 10_000;
const PALETTE = [
  "#3b5bdb", "#12b886", "#f59f00", "#e64980", "#7048e8",
  "#1c7ed6", "#82c91e", "#fd7e14", "#15aabf", "#868e96",
];
const DIMENSIONS = {
  model: { tab: "By model", none: "no model" },
  agent: { tab: "By agent", none: "no agent" },
  strategy: { tab: "By strategy", none: "no strategy" },
};

// The last `days` UTC days, today included: `from` is the start of the first, `to` the start
// of tomorrow (exclusive), and every day between as YYYY-MM-DD.
function periodOf(days, now) {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const first = today - (days - 1) * DAY_MS;
  const list = [];
  for (let day = first; day <= today; day += DAY_MS) list.push(new Date(day).toISOString().slice(0, 10));
  return {
    from: new Date(first).toISOString(),
    to: new Date(today + DAY_MS).toISOString(),
    today: new Date(today).toISOString(),
    hourAgo: new Date(now.getTime() - 3_600_000).toISOString(),
    days: list,
  };
}

function dayLabel(day, { year = false } = {}) {
  return new Date(`${day}T00:00:00Z`).toLocaleDateString("en-GB", {
    day: "2-digit",
    month: "short",
    ...(year ? { year: "numeric" } : {}),
    timeZone: "UTC",
  });
}

// Money as people read it: the API's exact figure when it has at most six decimals (most
// do), else rounded; the exact figure is always in the title.
function money(value) {
  if (value === null || value === undefined) return "—";
  const [whole, fraction = ""] = String(value).split(".");
  if (fraction.length <= 6) return `$${Number(whole).toLocaleString("en-US")}.${fraction.padEnd(2, "0")}`;
  return Math.abs(Number(value)) >= 0.01 ? usd(value) : `$${Number(value).toPrecision(3)}`;
}

function Money({ value }) {
  return (
    <span title={value === null || value === undefined ? undefined : `$${value}`} data-usd={value}>
      {money(value)}
    </span>
  );
}

// Exact sums of the API's decimal strings (to 1e-12, as the API keeps them).
const SCALE = 12;
function units(value) {
  const [whole, fraction = ""] = String(value).split(".");
  return BigInt(whole + (fraction + "0".repeat(SCALE)).slice(0, SCALE));
}
function decimal(amount) {
  const negative = amount < 0n;
  const digits = (negative ? -amount : amount).toString().padStart(SCALE + 1, "0");
  const fraction = digits.slice(-SCALE).replace(/0+$/, "");
  const whole = digits.slice(0, -SCALE);
  return `${negative ? "-" : ""}${whole}${fraction ? `.${fraction}` : ""}`;
}

const AXIS_MONEY = new Intl.NumberFormat("en-US", { style: "currency", currency: "USD", maximumSignificantDigits: 4 });

function share(part, whole) {
  const total = Number(whole);
  if (!total) return "—";
  return `${((Number(part) / total) * 100).toFixed(1)}%`;
}

export function CostsPage() {
  const { can, me } = useSession();
  if (!can("cost:view")) {
    return (
      <Page title="Costs">
        <Card>
          <p class="muted">
            Costs are visible to roles with the <code>cost:view</code> permission (tenant admins and auditors). Ask
            an admin of {me.tenant.name} if you need them.
          </p>
        </Card>
      </Page>
    );
  }
  return <CostReport tenant={me.tenant} canSeeLimits={can("rate_limit:configure")} />;
}

function CostReport({ tenant, canSeeLimits }) {
  const [days, setDays] = useState(30);
  const [asOf, setAsOf] = useState(() => new Date());
  const [dimension, setDimension] = useState("model");
  const period = useMemo(() => periodOf(days, asOf), [days, asOf]);
  const path = `/api/v1/tenants/${encodeURIComponent(tenant.id)}/costs`;
  const range = { from: period.from, to: period.to };
  const perDay = { ...range, group_by: "day", split_by: dimension, limit: MAX_GROUPS };

  const daily = useApi(path, perDay);
  const tasks = useApi(path, { ...range, group_by: "task", order: "cost", limit: 10 });
  const models = useApi(path, { ...range, group_by: "model", order: "cost" });
  const agents = useApi(path, { ...range, group_by: "agent", order: "cost" });
  const strategies = useApi(path, { ...range, group_by: "strategy", order: "cost" });

  const [save, saving] = useAction(() =>
    download(path, { query: perDay, accept: "text/csv", filename: `costs-${tenant.id}.csv` }),
  );

  const choose = (value) => {
    setDays(value);
    setAsOf(new Date());
  };

  return (
    <Page
      title="Costs"
      subtitle={`Spend of ${tenant.name}, ${dayLabel(period.days[0], { year: true })} – ${dayLabel(
        period.days[period.days.length - 1],
        { year: true },
      )} (UTC days).`}
      actions={
        <>
          <div class="costs-periods" role="group" aria-label="Period">
            {PERIODS.map((value) => (
              <button
                key={value}
                class={value === days ? "active" : ""}
                aria-pressed={value === days}
                aria-label={`Last ${value} days`}
                onClick={() => choose(value)}
              >
                {value} days
              </button>
            ))}
          </div>
          <button onClick={() => setAsOf(new Date())} title="Load the figures again">
            Refresh
          </button>
          <button class="primary" onClick={() => save()} disabled={saving.busy}>
            {saving.busy ? "Preparing…" : "Download CSV"}
          </button>
        </>
      }
    >
      <ErrorNote error={saving.error} />
      <Totals report={daily} />
      <Card
        title={`Spend per day ${DIMENSIONS[dimension].tab.toLowerCase()}`}
        actions={
          <div class="tabs costs-tabs" role="tablist" aria-label="Split the spend">
            {Object.entries(DIMENSIONS).map(([name, { tab }]) => (
              <button
                key={name}
                role="tab"
                aria-selected={name === dimension}
                class={name === dimension ? "active" : ""}
                onClick={() => setDimension(name)}
              >
                {tab}
              </button>
            ))}
          </div>
        }
      >
        <ErrorNote error={daily.error} />
        {daily.data && daily.data.split_by === dimension ? (
          <DailySpend report={daily.data} days={period.days} dimension={dimension} />
        ) : (
          !daily.error && <div class="costs-chart-placeholder"><Loading what="Loading the spend" /></div>
        )}
      </Card>
      <div class="grid two">
        <TopTasks report={tasks} />
        <BudgetUse
          path={path}
          tenant={tenant}
          canSeeLimits={canSeeLimits}
          today={period.today}
          hourAgo={period.hourAgo}
          asOf={asOf}
        />
      </div>
      <div class="grid two">
        <Breakdown title="Spend by model" column="Model" none="no model" report={models} />
        <Breakdown title="Spend by agent" column="Agent" none="no agent" report={agents} />
      </div>
      <div class="grid two">
        <Breakdown title="Spend by strategy" column="Strategy" none="no strategy" report={strategies} />
      </div>
    </Page>
  );
}

function Totals({ report }) {
  const totals = report.data?.totals;
  return (
    <Card class="costs-totals">
      {totals ? (
        <div class="stats">
          <Stat
            label="Spend"
            value={<Money value={totals.cost_usd} />}
            hint={money(totals.cost_usd) === `$${totals.cost_usd}` ? "priced calls" : `$${totals.cost_usd} exactly`}
          />
          <Stat label="Calls" value={count(totals.calls)} />
          <Stat
            label="Tokens"
            value={count(totals.input_tokens + totals.output_tokens)}
            hint={`${count(totals.input_tokens)} in · ${count(totals.output_tokens)} out`}
          />
          <Stat
            label="Unpriced calls"
            value={count(totals.unpriced_calls)}
            hint={totals.unpriced_calls ? "their cost is unknown" : "every call was priced"}
          />
        </div>
      ) : report.error ? (
        <ErrorNote error={report.error} />
      ) : (
        <Loading what="Adding up" />
      )}
    </Card>
  );
}

// The per-day groups as chart series: one per split value (costliest first), a point for
// every day of the period (0 where it spent nothing), each point keeping the API's figures.
function seriesOf(report, days, none) {
  const bySeries = new Map();
  for (const group of report.groups) {
    const entry = bySeries.get(group.split) ?? { split: group.split, total: 0, groups: new Map() };
    entry.total += Number(group.cost_usd);
    entry.groups.set(group.key, group);
    bySeries.set(group.split, entry);
  }
  const ordered = [...bySeries.values()].sort(
    (a, b) => b.total - a.total || String(a.split ?? "\uffff").localeCompare(String(b.split ?? "\uffff")),
  );
  return ordered.map((entry, index) => ({
    label: entry.split ?? none,
    split: entry.split,
    backgroundColor: PALETTE[index % PALETTE.length],
    borderWidth: 0,
    maxBarThickness: 36,
    data: days.map((day) => {
      const group = entry.groups.get(day);
      return {
        x: day,
        y: group ? Number(group.cost_usd) : 0,
        cost_usd: group ? group.cost_usd : null,
        calls: group ? group.calls : 0,
      };
    }),
  }));
}

function DailySpend({ report, days, dimension }) {
  const canvas = useRef(null);
  const none = DIMENSIONS[dimension].none;
  const series = useMemo(() => seriesOf(report, days, none), [report, days, none]);
  const label = `Spend per day ${DIMENSIONS[dimension].tab.toLowerCase()}`;

  useEffect(() => {
    if (!canvas.current || series.length === 0) return undefined;
    const chart = new Chart(canvas.current, {
      type: "bar",
      data: { labels: days, datasets: series },
      options: {
        animation: false,
        maintainAspectRatio: false,
        interaction: { mode: "index", intersect: false },
        scales: {
          x: {
            stacked: true,
            grid: { display: false },
            ticks: {
              maxRotation: 0,
              autoSkipPadding: 12,
              callback(value) {
                return dayLabel(this.getLabelForValue(value));
              },
            },
          },
          y: {
            stacked: true,
            beginAtZero: true,
            ticks: { callback: (value) => AXIS_MONEY.format(value) },
          },
        },
        plugins: {
          legend: { position: "bottom", labels: { boxWidth: 12, boxHeight: 12 } },
          tooltip: {
            filter: (item) => item.raw.cost_usd !== null,
            callbacks: {
              title: (items) => dayLabel(items[0].label, { year: true }),
              label: (item) => ` ${item.dataset.label}: $${item.raw.cost_usd} (${count(item.raw.calls)} calls)`,
            },
          },
        },
      },
    });
    // The chart and the exact figures it was drawn from, for whoever inspects the page.
    canvas.current.chart = chart;
    return () => chart.destroy();
  }, [series, days]);

  if (series.length === 0) {
    return <Empty>No spend in this period.</Empty>;
  }
  const spentDays = days.filter((day) => series.some((s) => s.data.find((p) => p.x === day).cost_usd !== null));
  return (
    <>
      {report.truncated && (
        <p class="muted">More than {count(MAX_GROUPS)} day groups: the chart shows the first ones only.</p>
      )}
      <div class="costs-chart">
        <canvas ref={canvas} role="img" aria-label={label} />
      </div>
      <details class="costs-figures">
        <summary>Show figures</summary>
        <div class="costs-figures-scroll">
          <table aria-label={`${label}: figures`}>
            <thead>
              <tr>
                <th>Day</th>
                {series.map((s) => (
                  <th key={s.label} class="number">
                    {s.label}
                  </th>
                ))}
                <th class="number">Day total</th>
              </tr>
            </thead>
            <tbody>
              {spentDays.map((day) => {
                let total = 0n;
                return (
                  <tr key={day}>
                    <th scope="row" class="costs-day">
                      {day}
                    </th>
                    {series.map((s) => {
                      const point = s.data.find((p) => p.x === day);
                      if (point.cost_usd !== null) total += units(point.cost_usd);
                      return (
                        <td key={s.label} class="number mono" data-usd={point.cost_usd}>
                          {point.cost_usd === null ? "—" : `$${point.cost_usd}`}
                        </td>
                      );
                    })}
                    <td class="number mono" data-usd={decimal(total)}>
                      ${decimal(total)}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
        <p class="muted costs-note">Days without spend are left out. Figures are exact, as the costs API gives them.</p>
      </details>
    </>
  );
}

function TopTasks({ report }) {
  const groups = report.data?.groups ?? [];
  return (
    <Card title="Top tasks">
      <ErrorNote error={report.error} />
      {report.loading && !report.data && <Loading what="Loading the tasks" />}
      {report.data && groups.length === 0 && <Empty>No task spent anything in this period.</Empty>}
      {groups.length > 0 && (
        <table class="costs-table" aria-label="Top tasks by cost">
          <thead>
            <tr>
              <th>Task</th>
              <th class="number">Calls</th>
              <th class="number">Tokens in</th>
              <th class="number">Tokens out</th>
              <th class="number">Cost</th>
            </tr>
          </thead>
          <tbody>
            {groups.map((group) => (
              <tr key={group.key ?? "none"}>
                <td>{group.key ? <IdLink to={`/tasks/${group.key}`} id={group.key} /> : <span class="muted">no task</span>}</td>
                <td class="number">{count(group.calls)}</td>
                <td class="number">{count(group.input_tokens)}</td>
                <td class="number">{count(group.output_tokens)}</td>
                <td class="number">
                  <Money value={group.cost_usd} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Card>
  );
}

function Breakdown({ title, column, none, report }) {
  const data = report.data;
  return (
    <Card title={title}>
      <ErrorNote error={report.error} />
      {report.loading && !data && <Loading />}
      {data && data.groups.length === 0 && <Empty>Nothing spent in this period.</Empty>}
      {data && data.groups.length > 0 && (
        <table class="costs-table" aria-label={title}>
          <thead>
            <tr>
              <th>{column}</th>
              <th class="number">Calls</th>
              <th class="number">Tokens</th>
              <th class="number">Unpriced</th>
              <th class="number">Cost</th>
              <th class="number">Share</th>
            </tr>
          </thead>
          <tbody>
            {data.groups.map((group) => (
              <tr key={group.key ?? "none"}>
                <td class={group.key ? "mono" : "muted"}>{group.key ?? none}</td>
                <td class="number">{count(group.calls)}</td>
                <td class="number">{count(group.input_tokens + group.output_tokens)}</td>
                <td class="number">{count(group.unpriced_calls)}</td>
                <td class="number">
                  <Money value={group.cost_usd} />
                </td>
                <td class="number muted">{share(group.cost_usd, data.totals.cost_usd)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Card>
  );
}

function BudgetUse({ path, tenant, canSeeLimits, today, hourAgo, asOf }) {
  const quotas = useApi(canSeeLimits ? `/api/v1/tenants/${encodeURIComponent(tenant.id)}/quotas` : null);
  const stamp = asOf.toISOString();
  const day = useApi(canSeeLimits ? path : null, { from: today, to: stamp });
  const hour = useApi(canSeeLimits ? path : null, { from: hourAgo, to: stamp });
  return (
    <Card title="Budget use">
      {!canSeeLimits ? (
        <p class="muted">
          The tenant's cost limits are not visible to this role (they need <code>rate_limit:configure</code>).
        </p>
      ) : (
        <>
          <ErrorNote error={quotas.error || day.error || hour.error} />
          {quotas.data && day.data && hour.data ? (
            <>
              <Meter label="Today (UTC)" spent={day.data.totals.cost_usd} limit={quotas.data.cost_per_day_usd} per="day" />
              <Meter label="Last hour" spent={hour.data.totals.cost_usd} limit={quotas.data.cost_per_hour_usd} per="hour" />
              <p class="muted costs-note">
                The limits are the tenant's quotas; a run that would go over one waits, then stops.
              </p>
            </>
          ) : (
            !(quotas.error || day.error || hour.error) && <Loading />
          )}
        </>
      )}
    </Card>
  );
}

function Meter({ label, spent, limit, per }) {
  if (limit === null || limit === undefined) {
    return (
      <div class="costs-meter">
        <div class="costs-meter-head">
          <span class="costs-meter-label">{label}</span>
          <span>
            <Money value={spent} /> <span class="muted">· no limit per {per}</span>
          </span>
        </div>
      </div>
    );
  }
  const ratio = Number(spent) / Number(limit);
  const percent = ratio * 100;
  const tone = ratio >= 1 ? "bad" : ratio >= 0.8 ? "warn" : "good";
  return (
    <div class="costs-meter">
      <div class="costs-meter-head">
        <span class="costs-meter-label">{label}</span>
        <span>
          <Money value={spent} /> <span class="muted">of</span> <Money value={limit} />{" "}
          <strong class={`costs-percent tone-text-${tone}`}>{percent < 0.1 && percent > 0 ? "<0.1" : percent.toFixed(1)}%</strong>
        </span>
      </div>
      <div
        class="costs-bar"
        role="meter"
        aria-label={`${label}: spend against the limit per ${per}`}
        aria-valuemin={0}
        aria-valuemax={Number(limit)}
        aria-valuenow={Number(spent)}
        aria-valuetext={`${percent.toFixed(1)}% of $${limit}`}
      >
        <span class={`costs-bar-fill tone-${tone}`} style={{ width: `${Math.min(100, percent)}%` }} />
      </div>
    </div>
  );
}
