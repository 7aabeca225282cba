import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load("cooco_naming_accuracy.py")
launch_gradio_widget(module)
