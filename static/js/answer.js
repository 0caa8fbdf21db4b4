// The search page's cited answer: POST /api/v1/answer with stream=true, read with fetch and a ReadableStream
// (EventSource cannot POST), shown above the results as it is written. Each [n] links to the viewer at the
// source's lines. Stop (or a new search replacing the results) aborts the fetch; the server then closes the model's call.
(function () {
  "use strict";

  let running = null; // the AbortController of the answer being written

  function part(section, name) {
    return section.querySelector(`.answer-${name}`);
  }

  function note(section, className, text) {
    const p = document.createElement("p");
    p.className = className;
    if (className === "error") p.setAttribute("role", "alert");
    p.textContent = text;
    part(section, "notes").appendChild(p);
  }

  // The text so far, markers as links: the server sends only whole markers naming a source.
  function render(target, text, sources) {
    target.textContent = "";
    const pieces = text.split(/(\[\d+\])/);
    for (const piece of pieces) {
      const marker = /^\[(\d+)\]$/.exec(piece);
      const source = marker && sources[marker[1]];
      if (!source) {
        target.appendChild(document.createTextNode(piece));
        continue;
      }
      const link = document.createElement(source.url ? "a" : "span");
      link.className = "cite";
      link.textContent = piece;
      link.title = source.citation;
      if (source.url) link.href = source.url;
      target.appendChild(link);
    }
  }

  function listSources(section, sources) {
    const list = part(section, "sources");
    list.textContent = "";
    for (const source of sources) {
      const item = document.createElement("li");
      item.value = source.number;
      const link = document.createElement(source.url ? "a" : "code");
      link.textContent = source.citation;
      if (source.url) link.href = source.url;
      item.appendChild(link);
      list.appendChild(item);
    }
  }

  function handle(section, state, name, data) {
    if (name === "sources") {
      for (const source of data.sources) state.sources[source.number] = source;
      listSources(section, data.sources);
    } else if (name === "delta") {
      state.text += data.text;
      render(part(section, "text"), state.text, state.sources);
    } else if (name === "error") {
      state.failed = true;
      note(section, "error", `No answer: ${data.message}. The search results below are unaffected.`);
    } else if (name === "done") {
      state.done = true;
      for (const warning of data.warnings) note(section, "warning", warning);
      const used = data.citations.length;
      part(section, "status").textContent = state.failed ? "" : `Cites ${used} source${used === 1 ? "" : "s"}.`;
    }
  }

  function parse(block) {
    let name = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue; // a keep-alive
      if (line.startsWith("event: ")) name = line.slice(7);
      else if (line.startsWith("data: ")) data.push(line.slice(6));
    }
    return data.length ? [name, JSON.parse(data.join("\n"))] : null;
  }

  async function answer(section) {
    if (running) running.abort();
    const controller = new AbortController();
    running = controller;
    const state = { sources: {}, text: "", failed: false, done: false };
    part(section, "text").textContent = "";
    part(section, "sources").textContent = "";
    part(section, "notes").textContent = "";
    part(section, "status").textContent = "Writing…";
    part(section, "stop").hidden = false;
    part(section, "start").disabled = true;
    const sources = section.dataset.sources ? section.dataset.sources.split(",") : [];
    try {
      const response = await fetch(section.dataset.url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream", "X-CSRFToken": section.dataset.csrf },
        body: JSON.stringify({ query: section.dataset.query, stream: true, sources }),
        signal: controller.signal,
      });
      if (!response.ok) {
        let message = `the server answered ${response.status}`;
        try { message = (await response.json()).error || message; } catch (ignored) { /* not JSON */ }
        state.failed = true;
        note(section, "error", `No answer: ${message}. The search results below are unaffected.`);
        return;
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = parse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (event) handle(section, state, event[0], event[1]);
        }
      }
      if (!state.done && !state.failed) note(section, "error", "The answer was cut off (the connection closed).");
    } catch (error) {
      if (error.name === "AbortError") part(section, "status").textContent = "Stopped.";
      else note(section, "error", "The answer could not reach the server (network error). The results below are unaffected.");
    } finally {
      if (running === controller) running = null;
      if (section.isConnected) {
        part(section, "stop").hidden = true;
        part(section, "start").disabled = false;
        if (part(section, "status").textContent === "Writing…") part(section, "status").textContent = "";
      }
    }
  }

  document.addEventListener("click", (event) => {
    const start = event.target.closest(".answer-start");
    if (start) answer(start.closest(".answer"));
    else if (event.target.closest(".answer-stop") && running) running.abort();
  });

  // A new search replaces the results (and this answer's box): the answer to the old query is stopped.
  document.addEventListener("htmx:beforeSwap", (event) => {
    if (running && event.detail.target && event.detail.target.id === "results") running.abort();
  });
})();
