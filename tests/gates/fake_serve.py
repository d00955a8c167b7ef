"""A stand-in for `vllm serve` with its process shape: an API server answering /health on
127.0.0.1 that forks an "engine core" child (same process group), prints the worker's ready
line, and writes both pids to $FAKE_SERVE_INFO. Used to test server lifetimes in a second
instead of a 25 s vLLM start.

    python fake_serve.py <port>
"""

import http.server
import json
import os
import sys
import time

READY_LINE = "ttsim worker ready"


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def main(port: int) -> None:
    engine = os.fork()
    if engine == 0:  # the engine core: lives until signalled, as vLLM's does
        while True:
            time.sleep(60)
    httpd = http.server.HTTPServer(("127.0.0.1", port), Health)
    info = {"api_pid": os.getpid(), "engine_pid": engine, "pgid": os.getpgid(0), "port": port}
    path = os.environ["FAKE_SERVE_INFO"]
    with open(path + ".tmp", "w") as f:
        json.dump(info, f)
    os.replace(path + ".tmp", path)
    print(READY_LINE, flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]))
