// The dashboard shell: sign-in, a hash router (#/jobs, #/jobs/<name>, #/models, #/endpoints) and polling
// every 2 seconds without reloading the page.

import { h, replaceChildren } from "./dom.js";
import { EndpointsPage } from "./endpoints_page.js";
import { JobPage } from "./job_page.js";
import { JobsPage } from "./jobs_page.js";
import { ModelsPage } from "./models_page.js";
import { describeError, showProblem } from "./problems.js";
import { clearSession, loadSession } from "./session.js";
import { renderSignIn } from "./signin_page.js";

const POLL_MS = 2000;

const main = document.getElementById("main");
const who = document.getElementById("who");
const updated = document.getElementById("updated");
let page = null;
let timer = null;
let generation = 0; // bumps on every navigation, so a late answer for an old page is dropped

function signOut(reason) {
  clearSession();
  showProblem(null);
  stopPolling();
  page = null;
  replaceChildren(who);
  renderSignIn(main, { onSignedIn: route, reason });
}

function stopPolling() {
  clearTimeout(timer);
  timer = null;
  generation += 1;
}

async function poll() {
  clearTimeout(timer);
  const mine = generation;
  const current = page;
  if (!current) return;
  try {
    await current.refresh();
    if (mine !== generation) return;
    showProblem(null);
    updated.dataset.at = String(Date.now());
    replaceChildren(updated, `Updated ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    if (mine !== generation) return;
    showProblem(error, { onSignIn: () => signOut("Sign in again.") });
    current.failed(describeError(error));
  }
  if (mine === generation) timer = setTimeout(poll, POLL_MS);
}

function refreshNow() {
  generation += 1;
  poll();
}

function route() {
  stopPolling();
  showProblem(null);
  const session = loadSession();
  if (!session) {
    signOut();
    return;
  }
  replaceChildren(
    who,
    h("span", { id: "signed-in-as" }, `${session.accessKeyId} · ${session.region}`),
    h("button", { type: "button", id: "sign-out", onclick: () => signOut() }, "Sign out"),
  );
  const [, section, ...rest] = (location.hash || "#/jobs").split("/");
  for (const link of document.querySelectorAll("header nav a")) {
    const active = ["models", "endpoints"].includes(section) ? section : "jobs";
    link.classList.toggle("active", link.getAttribute("href") === `#/${active}`);
  }
  if (section === "models") {
    page = new ModelsPage(main);
  } else if (section === "endpoints") {
    page = new EndpointsPage(main);
  } else if (section === "jobs" && rest.length) {
    page = new JobPage(main, decodeURIComponent(rest.join("/")), {
      refreshNow,
      onDeleted: () => {
        location.hash = "#/jobs";
      },
    });
  } else {
    page = new JobsPage(main, { refreshNow });
  }
  poll();
}

window.addEventListener("hashchange", route);
route();
