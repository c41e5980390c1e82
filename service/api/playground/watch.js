// The playground's "Watch pages" section: POST /v1/screenshot/compare and /v1/monitors from the browser, with the
// access key of the Keys fieldset (playground.js). No external assets; everything goes to this origin.
"use strict";

const W = (id) => document.getElementById(id);

function watchKey() {
  return W("access-key").value.trim();
}

async function api(method, path, body) {
  const headers = { "x-access-key": watchKey() };
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const fields = (answer.error_details || []).map((detail) => detail.field).join(", ");
    throw new Error(`${answer.error_code || response.status}: ${answer.error_message || ""}` +
      (fields ? ` (${fields})` : ""));
  }
  return answer;
}

function side(text, fullPage) {
  text = text.trim();
  if (/^[0-9a-f]{20,40}$/.test(text)) return { reference: text };
  return fullPage ? { url: text, full_page: true } : { url: text };
}

function picture(url, alt) {
  const link = document.createElement("a");
  link.href = url;
  link.target = "_blank";
  const image = document.createElement("img");
  image.src = url;
  image.alt = alt;
  link.append(image);
  return link;
}

function percent(share) {
  return `${(share * 100).toFixed(3)} %`;
}

async function compareShots(event) {
  event.preventDefault();
  const status = W("compare-status");
  const output = W("compare-output");
  output.replaceChildren();
  if (!watchKey()) { status.textContent = "Enter your access key first."; return; }
  status.textContent = "Capturing and comparing…";
  W("compare").disabled = true;
  try {
    const fullPage = W("compare-full-page").checked;
    const answer = await api("POST", "/v1/screenshot/compare",
      { before: side(W("compare-before").value, fullPage), after: side(W("compare-after").value, fullPage) });
    const change = answer.change;
    status.textContent = (answer.changed ? "Changed: " : "Unchanged: ") +
      `${percent(change.changed_share)} of the pixels, SSIM ${change.ssim.toFixed(4)}, ${change.boxes.length} ` +
      `region(s)` + (change.inserted_rows ? `, ${change.inserted_rows} rows inserted` : "") +
      (change.removed_rows ? `, ${change.removed_rows} rows removed` : "") + ".";
    status.dataset.state = answer.changed ? "changed" : "unchanged";
    output.append(picture(answer.diff.url, "The newer shot with its changes tinted"));
  } catch (error) {
    status.textContent = `Refused: ${error.message}`;
    status.dataset.state = "refused";
  } finally {
    W("compare").disabled = false;
  }
}

function scheduleText(schedule) {
  return schedule.interval ? `every ${schedule.interval} s` : `${schedule.cron} (${schedule.timezone})`;
}

function button(text, action) {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = text;
  element.addEventListener("click", action);
  return element;
}

async function showRuns(monitor) {
  const box = W("runs");
  box.replaceChildren();
  const heading = document.createElement("h3");
  heading.textContent = `Runs of ${monitor.name || monitor.id}, newest first`;
  box.append(heading);
  const { runs } = await api("GET", `/v1/monitors/${monitor.id}/runs?limit=10`);
  if (!runs.length) box.append("No run yet.");
  for (const run of runs) {
    const line = document.createElement("p");
    line.className = "run";
    line.textContent = `${run.due}: ${run.status}` + (run.changed === null ? (run.status === "done" ?
      " (the baseline)" : ` ${run.error_code}: ${run.error_message}`) :
      (run.changed ? `, changed ${percent(run.change.changed_share)}` : ", unchanged"));
    box.append(line);
    if (run.changed && run.diff) box.append(picture(run.diff.url, `The diff of the run due ${run.due}`));
  }
}

async function listMonitors() {
  const body = W("monitors").tBodies[0];
  const { monitors } = await api("GET", "/v1/monitors");
  body.replaceChildren();
  for (const monitor of monitors) {
    const row = body.insertRow();
    row.dataset.id = monitor.id;
    row.insertCell().textContent = `${monitor.name || monitor.id} ${monitor.request.url || ""}`;
    row.insertCell().textContent = scheduleText(monitor.schedule);
    row.insertCell().textContent = monitor.paused ? `paused${monitor.paused_reason ? ": " + monitor.paused_reason : ""}`
      : `next ${monitor.next_run}`;
    const last = monitor.last_run;
    row.insertCell().textContent = last ? `${last.status}${last.changed ? ", changed" : ""}` : "none yet";
    const actions = row.insertCell();
    actions.append(
      button("Runs", () => showRuns(monitor).catch(report)),
      button(monitor.paused ? "Resume" : "Pause", () =>
        api("PATCH", `/v1/monitors/${monitor.id}`, { paused: !monitor.paused }).then(listMonitors).catch(report)),
      button("Delete", () => api("DELETE", `/v1/monitors/${monitor.id}`).then(listMonitors).catch(report)));
  }
  W("monitor-status").textContent = monitors.length ? `${monitors.length} monitor(s).` : "No monitors yet.";
}

function report(error) {
  W("monitor-status").textContent = `Refused: ${error.message}`;
  W("monitor-status").dataset.state = "refused";
}

async function createMonitor(event) {
  event.preventDefault();
  if (!watchKey()) { W("monitor-status").textContent = "Enter your access key first."; return; }
  const cron = W("monitor-cron").value.trim();
  const spec = {
    request: { url: W("monitor-url").value.trim() },
    schedule: cron ? { cron, timezone: W("monitor-timezone").value.trim() || "UTC" }
      : { interval: Number(W("monitor-every").value) },
    only_on_change: !W("monitor-every-run").checked,
  };
  const webhook = W("monitor-webhook").value.trim();
  if (webhook) spec.webhook_url = webhook;
  try {
    const created = await api("POST", "/v1/monitors", spec);
    await listMonitors();
    W("monitor-status").textContent = `Created ${created.id}: its first run is now.`;
    W("monitor-status").dataset.state = "created";
  } catch (error) {
    report(error);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  W("compare-form").addEventListener("submit", compareShots);
  W("monitor-form").addEventListener("submit", createMonitor);
  W("monitor-refresh").addEventListener("click", () => listMonitors().catch(report));
});
