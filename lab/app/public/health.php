<?php
// An unrelated page that touches no upstream: its latency shows whether FPM workers are starved.
header('Content-Type: application/json');
echo '{"status":"ok"}';
